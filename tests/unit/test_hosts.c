/* Unit tests for jail_hosts_text (src/jail/mounts.c): the run's /etc/hosts
 * keeps the host's entries but none of the server's own names. */
#include <string.h>

#include "jail/jail.h"
#include "test.h"

static const char *hosts(const char *in, const char *nodename)
{
        static char out[4096];
        jail_hosts_text(in, nodename, "sandbox", out, sizeof(out));
        return out;
}

TEST(hosts_drop_the_servers_names_and_add_the_sandboxs)
{
        EXPECT_STR_EQ(hosts("127.0.0.1\tlocalhost\n127.0.1.1\tvm.example.org vm\n"
                            "::1 localhost ip6-localhost\n",
                            "vm"),
                      "127.0.0.1 localhost\n::1 localhost ip6-localhost\n127.0.1.1 sandbox\n");
        /* a qualified nodename: its short form goes too, any case */
        EXPECT_STR_EQ(hosts("10.0.0.7 Web-1.prod.local web-1 api\n", "web-1.prod.local"),
                      "10.0.0.7 api\n127.0.1.1 sandbox\n");
}

TEST(hosts_keep_other_entries_and_drop_comments)
{
        EXPECT_STR_EQ(hosts("# managed by kubelet\n10.1.2.3 db db.internal # the database\n"
                            "\n   \n10.9.9.9 vmware\n",
                            "vm"),
                      "10.1.2.3 db db.internal\n10.9.9.9 vmware\n127.0.1.1 sandbox\n");
        EXPECT_STR_EQ(hosts("", "vm"), "127.0.1.1 sandbox\n");
        EXPECT_STR_EQ(hosts("127.0.0.1 localhost", ""), "127.0.0.1 localhost\n127.0.1.1 sandbox\n");
}

TEST(hosts_clip_to_the_buffer)
{
        char out[24];
        jail_hosts_text("127.0.0.1 localhost\n10.0.0.1 a b c d e f g\n", "vm", "sandbox", out,
                        sizeof(out));
        EXPECT_TRUE(strlen(out) < sizeof(out));
        EXPECT_STR_EQ(out, "127.0.0.1 localhost\n");
}
