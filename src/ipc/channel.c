/* Fixed-size messages with SCM_RIGHTS over SEQPACKET sockets (see
 * channel.h). A message of the wrong size, truncated control data or more
 * fds than expected is a protocol error and every received fd is closed. */
#include "ipc/channel.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/util.h"

#define CHANNEL_MAX_FDS 12

int channel_send(int sock, const void *msg, size_t len, const int *fds, size_t n_fds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * CHANNEL_MAX_FDS)];
                struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (n_fds > CHANNEL_MAX_FDS)
                return -EINVAL;
        if (n_fds > 0) {
                memset(u.buf, 0, sizeof(u.buf));
                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        ssize_t n = RETRY_EINTR(sendmsg(sock, &mh, MSG_NOSIGNAL));
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EPROTO;
}

static size_t take_fds(struct msghdr *mh, int *fds, size_t max_fds, bool *overflow)
{
        size_t n = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (n < max_fds)
                                fds[n++] = fd;
                        else {
                                close(fd);
                                *overflow = true;
                        }
                }
        }
        return n;
}

int channel_recv(int sock, void *msg, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * CHANNEL_MAX_FDS)];
                struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = msg, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        ssize_t n = RETRY_EINTR(recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT));
        if (n < 0)
                return -errno;
        bool overflow = false;
        size_t nf = take_fds(&mh, fds, max_fds, &overflow);
        if (n == 0 && nf == 0)
                return 0;
        if ((size_t)n != len || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || overflow) {
                for (size_t i = 0; i < nf; i++)
                        close(fds[i]);
                return -EPROTO;
        }
        *ret_n_fds = nf;
        return 1;
}
