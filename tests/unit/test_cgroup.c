/* Unit tests for the statistics parsing of jail/cgroup.c: the OOM kill
 * counter read from the kernel's "key value" files in their v1 and v2
 * shapes (memory.oom_control, memory.events), where other keys share its
 * prefix, and the socket-buffer allowance of a v1 run. Groups themselves
 * need root and a hierarchy: tests/integration/test_limits.py covers them. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "test.h"

static char dir[64];

static void write_text(const char *file, const char *text)
{
        if (!dir[0]) {
                snprintf(dir, sizeof(dir), "/tmp/lockbox-unit-cg-XXXXXX");
                if (!mkdtemp(dir))
                        dir[0] = '\0';
        }
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        FILE *f = fopen(path, "we");
        if (f) {
                fputs(text, f);
                fclose(f);
        }
}

static void cleanup(const char *const *files)
{
        for (; *files; files++) {
                char path[128];
                snprintf(path, sizeof(path), "%s/%s", dir, *files);
                unlink(path);
        }
        rmdir(dir);
}

/* cgroup v2 (kernel 6.1's memory.events): "oom" and "oom_group_kill" are
 * not "oom_kill". */
TEST(cgroup_read_keyed_v2_memory_events)
{
        write_text("memory.events", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n"
                                    "oom_group_kill 1\n");
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.events", "oom_kill"), 2);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.events", "oom"), 3);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.events", "max"), 12);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.events", "oom_group_kill"), 1);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.events", "kill"), 0);
        cleanup((const char *const[]){"memory.events", NULL});
}

/* cgroup v1: oom_kill_disable comes first and must not be read as oom_kill. */
TEST(cgroup_read_keyed_v1_oom_control)
{
        write_text("memory.oom_control", "oom_kill_disable 1\nunder_oom 0\noom_kill 5\n");
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.oom_control", "oom_kill"), 5);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.oom_control", "oom_kill_disable"), 1);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "memory.oom_control", "under_oom"), 0);
        /* kernels before 4.13 have no oom_kill line at all */
        write_text("old.oom_control", "oom_kill_disable 0\nunder_oom 1\n");
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "old.oom_control", "oom_kill"), 0);
        cleanup((const char *const[]){"memory.oom_control", "old.oom_control", NULL});
}

TEST(cgroup_read_keyed_edges)
{
        write_text("last", "a 1\nbig 18446744073709551615"); /* no final newline */
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "last", "big"), UINT64_MAX);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "last", "a"), 1);
        write_text("empty", "");
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "empty", "a"), 0);
        /* a key inside a line, or without its space, is not the key */
        write_text("inner", "xa 7\na\t8\nab 9\n");
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "inner", "a"), 0);
        EXPECT_UINT_EQ(cgroup_read_keyed(dir, "missing", "a"), 0);
        EXPECT_UINT_EQ(cgroup_read_keyed("/nonexistent", "memory.events", "oom_kill"), 0);
        cleanup((const char *const[]){"last", "empty", "inner", NULL});
}

TEST(cgroup_v1_tcp_allowance)
{
        EXPECT_INT_EQ(CGROUP_V1_TCP_BYTES(0), 0);
        EXPECT_INT_EQ(CGROUP_V1_TCP_BYTES(16 << 20), 2 << 20); /* an eighth */
        EXPECT_INT_EQ(CGROUP_V1_TCP_BYTES(512LL << 20), 64 << 20);
        EXPECT_INT_EQ(CGROUP_V1_TCP_BYTES(1LL << 30), 64 << 20); /* at most 64 MiB */
}
