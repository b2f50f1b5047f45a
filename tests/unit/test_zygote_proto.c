/* Unit tests for ipc/zygote_proto.c: the order of a SPAWN's descriptors,
 * encoded by the jailer and decoded by the zygote. */
#include <errno.h>

#include "ipc/zygote_proto.h"
#include "test.h"

static void expect_same(const struct zygote_fds *a, const struct zygote_fds *b)
{
        EXPECT_INT_EQ(a->sync, b->sync);
        EXPECT_INT_EQ(a->code, b->code);
        EXPECT_INT_EQ(a->out, b->out);
        EXPECT_INT_EQ(a->err, b->err);
        EXPECT_INT_EQ(a->cgroup_procs[0], b->cgroup_procs[0]);
        EXPECT_INT_EQ(a->cgroup_procs[1], b->cgroup_procs[1]);
        EXPECT_INT_EQ(a->cgroup_dirfd, b->cgroup_dirfd);
        EXPECT_INT_EQ(a->deps, b->deps);
        EXPECT_INT_EQ(a->report, b->report);
        EXPECT_INT_EQ(a->netns, b->netns);
}

TEST(zygote_fds_v1_everything)
{
        struct zygote_fds f = {.sync = 10,
                               .code = 11,
                               .out = 12,
                               .err = 13,
                               .cgroup_procs = {14, 15},
                               .cgroup_dirfd = -1,
                               .deps = 16,
                               .report = 17,
                               .netns = 18},
                          back;
        struct zygote_spawn m = {0};
        int fds[ZYGOTE_SPAWN_MAX_FDS];
        size_t n = zygote_fds_encode(&f, &m, fds);
        EXPECT_SIZE_EQ(n, 9);
        for (size_t i = 0; i < n; i++)
                EXPECT_INT_EQ(fds[i], 10 + (int)i);
        EXPECT_UINT_EQ(m.n_cgroup_procs, 2);
        EXPECT_UINT_EQ(m.cgroup_dirfd, 0);
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, n, &back), 0);
        expect_same(&f, &back);
        if (test_failed)
                return;
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, n - 1, &back), -EBADMSG);
}

TEST(zygote_fds_v2_some)
{
        struct zygote_fds f = {.sync = 3,
                               .code = 4,
                               .out = 5,
                               .err = 6,
                               .cgroup_procs = {-1, -1},
                               .cgroup_dirfd = 7,
                               .deps = -1,
                               .report = 8,
                               .netns = -1},
                          back;
        struct zygote_spawn m = {0};
        int fds[ZYGOTE_SPAWN_MAX_FDS];
        size_t n = zygote_fds_encode(&f, &m, fds);
        EXPECT_SIZE_EQ(n, 6);
        EXPECT_INT_EQ(fds[4], 7);
        EXPECT_INT_EQ(fds[5], 8);
        EXPECT_UINT_EQ(m.cgroup_dirfd, 1);
        EXPECT_UINT_EQ(m.deps_fd + m.netns_fd, 0);
        EXPECT_UINT_EQ(m.report_fd, 1);
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, n, &back), 0);
        expect_same(&f, &back);
}

TEST(zygote_fds_decode_refuses_bad_counts)
{
        int fds[ZYGOTE_SPAWN_MAX_FDS] = {0};
        struct zygote_fds back;
        struct zygote_spawn m = {.n_cgroup_procs = 3};
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, 7, &back), -EBADMSG);
        m = (struct zygote_spawn){.cgroup_dirfd = 1, .n_cgroup_procs = 1};
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, 6, &back), -EBADMSG);
        m = (struct zygote_spawn){.deps_fd = 2};
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, 6, &back), -EBADMSG);
        m = (struct zygote_spawn){0};
        EXPECT_INT_EQ(zygote_fds_decode(&m, fds, 4, &back), 0);
        EXPECT_INT_EQ(back.cgroup_dirfd, -1);
        EXPECT_INT_EQ(back.netns, -1);
}
