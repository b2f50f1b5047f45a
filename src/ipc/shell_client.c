/* One shell-job call (see shell_client.h). The blob goes in a memfd, not
 * on the channel: a script may be as large as server.max_body_bytes, and
 * the jailer maps it whole instead of reading it piece by piece in its
 * single loop; the seals keep this process from changing it under the
 * jailer's eyes. */
#include "ipc/shell_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/util.h"
#include "ipc/channel.h"

#define BLOB_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

/* The blob in a sealed memfd, its file offset back at 0 (the jailer's
 * descriptor shares it); the fd, or -errno. */
static int blob_memfd(const char *blob, size_t len)
{
        _cleanup_close_ int fd =
            memfd_create("lockbox-shell-text", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < len;) {
                ssize_t n = RETRY_EINTR(write(fd, blob + done, len - done));
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                done += (size_t)n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0 || fcntl(fd, F_ADD_SEALS, BLOB_SEALS) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* A new channel announced on the control socket; our end, or -errno. */
static int channel_open(int ctrl_fd, const char *trace_id)
{
        int ch[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) < 0)
                return -errno;
        struct proto_shell m = {.hdr = {PROTO_MAGIC, PROTO_SHELL}};
        strncpy(m.trace_id, trace_id ? trace_id : "", PROTO_TRACE_LEN);
        int r = channel_send(ctrl_fd, &m, sizeof(m), &ch[1], 1);
        close(ch[1]);
        if (r < 0) {
                close(ch[0]);
                return r;
        }
        return ch[0];
}

/* The request, with the blob's memfd when there is a blob. A jailer that
 * refused the call may have answered and closed the channel already: the
 * answer is read all the same. */
static int send_request(int chan, const struct shell_req *req, const char *blob, size_t len)
{
        _cleanup_close_ int fd = -1;
        if (blob) {
                fd = blob_memfd(blob, len);
                if (fd < 0)
                        return fd;
        }
        int r = channel_send(chan, req, sizeof(*req), &fd, fd >= 0 ? 1 : 0);
        return r == -EPIPE || r == -ECONNRESET ? 0 : r;
}

/* Until the channel is readable: 0, -ETIMEDOUT or -ECANCELED. */
static int wait_reply(int chan, int deadline_ms, int cancel_fd)
{
        int64_t deadline = monotonic_ms() + deadline_ms;
        for (;;) {
                struct pollfd p[2] = {{.fd = chan, .events = POLLIN},
                                      {.fd = cancel_fd, .events = POLLIN}};
                int64_t left = deadline - monotonic_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                int n = poll(p, 2, (int)left);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && p[0].revents)
                        return 0;
                if (n > 0 && p[1].revents)
                        return -ECANCELED;
        }
}

static int take_reply(int chan, struct shell_reply *ret, int *ret_fd)
{
        struct shell_reply rep;
        int fds[1];
        size_t nf = 0;
        int r = channel_recv(chan, &rep, sizeof(rep), fds, 1, &nf);
        /* a jailer that answered and closed before it read the request
         * leaves ECONNRESET pending before its answer: the error is told
         * once, then the queued answer is read */
        if (r == -ECONNRESET)
                r = channel_recv(chan, &rep, sizeof(rep), fds, 1, &nf);
        if (r <= 0)
                return r == 0 || r == -EPIPE ? -ECONNRESET : r;
        if (rep.hdr.magic != PROTO_MAGIC || rep.hdr.type != PROTO_SHELL_REPLY) {
                if (nf)
                        close(fds[0]);
                return -EPROTO;
        }
        rep.code[sizeof(rep.code) - 1] = '\0';
        rep.message[sizeof(rep.message) - 1] = '\0';
        rep.view.job_id[SHELL_JOB_ID_LEN] = '\0';
        *ret = rep;
        *ret_fd = nf ? fds[0] : -1;
        return 0;
}

int ipc_shell_open(int ctrl_fd, const char *trace_id, const struct shell_req *req, const char *blob,
                   size_t blob_len, int deadline_ms, int cancel_fd, struct shell_reply *ret,
                   int *ret_fd, int *ret_chan)
{
        _cleanup_close_ int chan = channel_open(ctrl_fd, trace_id);
        if (chan < 0)
                return chan;
        int r = send_request(chan, req, blob, blob_len);
        if (r == 0)
                r = wait_reply(chan, deadline_ms, cancel_fd);
        if (r == 0)
                r = take_reply(chan, ret, ret_fd);
        if (r == 0)
                *ret_chan = TAKE_FD(chan);
        return r;
}

int ipc_shell_next(int chan, int deadline_ms, int cancel_fd, struct shell_reply *ret)
{
        int fd = -1;
        int r = wait_reply(chan, deadline_ms, cancel_fd);
        if (r == 0)
                r = take_reply(chan, ret, &fd);
        safe_close(fd);
        return r;
}

int ipc_shell_call(int ctrl_fd, const char *trace_id, const struct shell_req *req, const char *blob,
                   size_t blob_len, int deadline_ms, int cancel_fd, struct shell_reply *ret,
                   int *ret_fd)
{
        int chan = -1;
        int r = ipc_shell_open(ctrl_fd, trace_id, req, blob, blob_len, deadline_ms, cancel_fd, ret,
                               ret_fd, &chan);
        safe_close(chan);
        return r;
}
