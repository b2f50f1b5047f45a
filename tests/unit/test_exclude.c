/* The snapshot's gitignore-style exclude patterns (shell/exclude.h):
 * globs, anchoring, directories only, negation, comments, "**". */
#include <errno.h>
#include <stdlib.h>

#include "shell/exclude.h"
#include "test.h"

/* Is path (a directory when is_dir) excluded by the patterns? */
static bool excluded(const char *const *pats, size_t n, const char *path, bool is_dir)
{
        struct exclude_set *x = NULL;
        if (exclude_set_new(pats, n, &x) < 0)
                return false;
        bool r = exclude_set_match(x, path, is_dir) == 1;
        exclude_set_free(x);
        return r;
}

#define EX(path, dir, ...)                                                                         \
        excluded((const char *const[]){__VA_ARGS__},                                               \
                 sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *), path, dir)

TEST(exclude_glob_star_question_class)
{
        EXPECT_TRUE(exclude_glob_match("*.log", "a.log"));
        EXPECT_FALSE(exclude_glob_match("*.log", "d/a.log"));
        EXPECT_TRUE(exclude_glob_match("a?c", "abc"));
        EXPECT_FALSE(exclude_glob_match("a?c", "a/c"));
        EXPECT_TRUE(exclude_glob_match("[a-c]x", "bx"));
        EXPECT_FALSE(exclude_glob_match("[a-c]x", "dx"));
        EXPECT_TRUE(exclude_glob_match("[!a-c]x", "dx"));
        EXPECT_TRUE(exclude_glob_match("[^a]x", "bx"));
        EXPECT_FALSE(exclude_glob_match("[!a]x", "ax"));
        EXPECT_TRUE(exclude_glob_match("[]x", "[]x")); /* no closing ']': literal */
        EXPECT_TRUE(exclude_glob_match("\\*", "*"));
        EXPECT_FALSE(exclude_glob_match("\\*", "a"));
        EXPECT_TRUE(exclude_glob_match("*", ""));
        EXPECT_FALSE(exclude_glob_match("*", "a/b"));
}

TEST(exclude_glob_double_star)
{
        EXPECT_TRUE(exclude_glob_match("**/foo", "foo"));
        EXPECT_TRUE(exclude_glob_match("**/foo", "a/b/foo"));
        EXPECT_FALSE(exclude_glob_match("**/foo", "a/xfoo"));
        EXPECT_TRUE(exclude_glob_match("a/**/b", "a/b"));
        EXPECT_TRUE(exclude_glob_match("a/**/b", "a/x/y/b"));
        EXPECT_FALSE(exclude_glob_match("a/**/b", "ab"));
        EXPECT_TRUE(exclude_glob_match("a/**", "a/x"));
        EXPECT_TRUE(exclude_glob_match("a/**", "a/x/y"));
        EXPECT_FALSE(exclude_glob_match("a/**", "a"));
        EXPECT_TRUE(exclude_glob_match("**", "a/b/c"));
}

TEST(exclude_basename_at_any_depth)
{
        EXPECT_TRUE(EX("node_modules", true, "node_modules"));
        EXPECT_TRUE(EX("proj/node_modules", true, "node_modules"));
        EXPECT_TRUE(EX("x/y/z.pyc", false, "*.pyc"));
        EXPECT_FALSE(EX("x/y/z.py", false, "*.pyc"));
}

TEST(exclude_anchored)
{
        EXPECT_TRUE(EX("build", true, "/build"));
        EXPECT_FALSE(EX("src/build", true, "/build"));
        EXPECT_TRUE(EX("src/gen", true, "src/gen"));
        EXPECT_FALSE(EX("a/src/gen", true, "src/gen"));
        EXPECT_TRUE(EX("docs/a.md", false, "docs/*.md"));
        EXPECT_FALSE(EX("docs/x/a.md", false, "docs/*.md"));
}

TEST(exclude_dir_only)
{
        EXPECT_TRUE(EX("cache", true, "cache/"));
        EXPECT_FALSE(EX("cache", false, "cache/"));
        EXPECT_TRUE(EX("a/cache", true, "cache/"));
        EXPECT_TRUE(EX("a/b", true, "/a/b/"));
        EXPECT_FALSE(EX("a/b", false, "/a/b/"));
}

TEST(exclude_negation_last_wins)
{
        EXPECT_FALSE(EX("keep.log", false, "*.log", "!keep.log"));
        EXPECT_TRUE(EX("drop.log", false, "*.log", "!keep.log"));
        EXPECT_TRUE(EX("keep.log", false, "!keep.log", "*.log"));
        EXPECT_FALSE(EX("x", false, "!x"));
        EXPECT_TRUE(EX("!x", false, "\\!x"));
}

TEST(exclude_comments_blank_spaces)
{
        EXPECT_FALSE(EX("#x", false, "#x"));
        EXPECT_TRUE(EX("#x", false, "\\#x"));
        EXPECT_FALSE(EX("a", false, ""));
        EXPECT_FALSE(EX("a", false, "   "));
        EXPECT_TRUE(EX("a", false, "a   "));
        EXPECT_TRUE(EX("a ", false, "a\\ "));
        EXPECT_FALSE(EX("a", false, "/"));
}

TEST(exclude_pathological_pattern_is_bounded)
{
        char path[201];
        memset(path, 'a', 200);
        path[200] = '\0';
        EXPECT_INT_OP(exclude_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*b", path), ==, -E2BIG);
        EXPECT_INT_OP(exclude_glob_match("*a*b", path), ==, 0);
        EXPECT_INT_OP(exclude_glob_match("*a*a", path), ==, 1);
        struct exclude_set *x = NULL;
        EXPECT_INT_OP(exclude_set_new((const char *const[]){"**/**/**/**/**/**/**/**/x"}, 1, &x),
                      ==, 0);
        EXPECT_INT_OP(exclude_set_match(x, "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/y", false),
                      ==, -E2BIG);
        exclude_set_free(x);
}
