/* Unit tests for the text handling of src/deps/deps.c: which requirements
 * files count as empty (no pip at all), the name and version read from a
 * wheel's METADATA (untrusted: it comes from the package), and the hash
 * that decides whether a file changed. */
#include <errno.h>
#include <string.h>

#include "deps/deps.h"
#include "test.h"

static bool empty(const char *s)
{
        return deps_requirements_empty(s, strlen(s));
}

TEST(deps_requirements_empty_only_for_blanks_and_comments)
{
        EXPECT_TRUE(empty(""));
        EXPECT_TRUE(empty("\n\n"));
        EXPECT_TRUE(empty("# nothing\n   # indented comment\n\t\r\n"));
        EXPECT_TRUE(empty("   "));
        EXPECT_TRUE(!empty("requests"));
        EXPECT_TRUE(!empty("# c\nrequests==2.31\n"));
        EXPECT_TRUE(!empty("  -r other.txt\n"));
        EXPECT_TRUE(!empty("--index-url http://x/\n"));
        /* a line after the last newline still counts */
        EXPECT_TRUE(!empty("# c\nsix"));
        /* NUL bytes are content, not the end of the text */
        EXPECT_TRUE(!deps_requirements_empty("#\n\0x", 4));
}

TEST(deps_parse_metadata_reads_name_and_version)
{
        char name[64], version[32];
        const char *md = "Metadata-Version: 2.1\nName: demo-alpha\nVersion: 1.0.post1\n"
                         "Summary: x\n\nName: not-this\nVersion: 9\n";
        EXPECT_INT_EQ(deps_parse_metadata(md, name, sizeof(name), version, sizeof(version)), 0);
        EXPECT_STR_EQ(name, "demo-alpha");
        EXPECT_STR_EQ(version, "1.0.post1");
        /* CRLF line ends; the first Name wins */
        md = "Name: Six\r\nName: other\r\nVersion: 1.16.0\r\n\r\nVersion: 2\r\n";
        EXPECT_INT_EQ(deps_parse_metadata(md, name, sizeof(name), version, sizeof(version)), 0);
        EXPECT_STR_EQ(name, "Six");
        EXPECT_STR_EQ(version, "1.16.0");
}

TEST(deps_parse_metadata_rejects_incomplete_and_clips_long_fields)
{
        char name[8], version[8];
        EXPECT_INT_EQ(deps_parse_metadata("", name, sizeof(name), version, sizeof(version)),
                      -EINVAL);
        EXPECT_INT_EQ(
            deps_parse_metadata("Name: a\n", name, sizeof(name), version, sizeof(version)),
            -EINVAL);
        /* fields after the headers do not count */
        EXPECT_INT_EQ(deps_parse_metadata("Name: a\n\nVersion: 1\n", name, sizeof(name), version,
                                          sizeof(version)),
                      -EINVAL);
        EXPECT_INT_EQ(deps_parse_metadata("Version: 1\nName:b\n", name, sizeof(name), version,
                                          sizeof(version)),
                      -EINVAL);
        EXPECT_INT_EQ(deps_parse_metadata("Name: a-very-long-name\nVersion: 1.2.3.4.5.6\n", name,
                                          sizeof(name), version, sizeof(version)),
                      0);
        EXPECT_STR_EQ(name, "a-very-");
        EXPECT_STR_EQ(version, "1.2.3.4");
}

TEST(deps_hash_changes_with_every_byte)
{
        uint64_t seed = 0xcbf29ce484222325ULL;
        uint64_t a = deps_hash("six\n", 4, seed);
        EXPECT_TRUE(a == deps_hash("six\n", 4, seed));
        EXPECT_TRUE(a != deps_hash("six \n", 5, seed));
        EXPECT_TRUE(a != deps_hash("siy\n", 4, seed));
        EXPECT_TRUE(deps_hash("", 0, seed) == seed);
        /* chaining: the mirror or wheel dir changing changes the hash */
        EXPECT_TRUE(deps_hash("a", 1, a) != deps_hash("b", 1, a));
}
