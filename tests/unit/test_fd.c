/* Unit tests for base/fd.c: closing inherited descriptors, also where
 * close_range is refused (an old kernel, a container's filter). */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "base/fd.h"
#include "test.h"

static bool is_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

static void open_some(int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++)
                fds[i] = open("/dev/null", O_RDONLY);
}

static void check_closes_all_but_kept(void)
{
        int fds[8];
        open_some(fds, 8);
        int keep[] = {fds[2], -1, fds[5]};
        fd_close_all_except(fds[0], keep, 3);
        for (size_t i = 0; i < 8; i++)
                EXPECT_INT_EQ(is_open(fds[i]), i == 2 || i == 5);
        EXPECT_TRUE(is_open(0) && is_open(1) && is_open(2));
        fd_close_from(fds[0]);
        EXPECT_TRUE(!is_open(fds[2]) && !is_open(fds[5]));
}

TEST(fd_close_all_except_with_close_range)
{
        check_closes_all_but_kept();
}

TEST(fd_close_all_except_when_close_range_is_refused)
{
        /* each test runs in a process of its own: the filter dies with it */
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        EXPECT_TRUE(ctx != NULL);
        EXPECT_INT_EQ(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
                                       seccomp_syscall_resolve_name("close_range"), 0),
                      0);
        EXPECT_INT_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        EXPECT_INT_EQ(seccomp_load(ctx), 0);
        seccomp_release(ctx);
        check_closes_all_but_kept();
}
