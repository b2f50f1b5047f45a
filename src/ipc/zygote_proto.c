/* The order of a SPAWN's descriptors, written once for both ends: the
 * jailer encodes (jailer/zygote.c), the zygote decodes (zygote/main.c). */
#include "ipc/zygote_proto.h"

#include <errno.h>

size_t zygote_fds_encode(const struct zygote_fds *f, struct zygote_spawn *m, int *fds)
{
        size_t n = 0;
        fds[n++] = f->sync;
        fds[n++] = f->code;
        fds[n++] = f->out;
        fds[n++] = f->err;
        m->cgroup_dirfd = f->cgroup_dirfd >= 0;
        m->n_cgroup_procs = 0;
        if (m->cgroup_dirfd)
                fds[n++] = f->cgroup_dirfd;
        for (size_t i = 0; !m->cgroup_dirfd && i < 2; i++)
                if (f->cgroup_procs[i] >= 0) {
                        fds[n++] = f->cgroup_procs[i];
                        m->n_cgroup_procs++;
                }
        const int optional[] = {f->deps, f->report, f->netns};
        uint32_t *present[] = {&m->deps_fd, &m->report_fd, &m->netns_fd};
        for (size_t i = 0; i < 3; i++) {
                *present[i] = optional[i] >= 0;
                if (optional[i] >= 0)
                        fds[n++] = optional[i];
        }
        return n;
}

int zygote_fds_decode(const struct zygote_spawn *m, const int *fds, size_t n,
                      struct zygote_fds *ret)
{
        if (m->n_cgroup_procs > 2 || m->cgroup_dirfd > 1 || m->deps_fd > 1 || m->report_fd > 1 ||
            m->netns_fd > 1 || (m->cgroup_dirfd && m->n_cgroup_procs) ||
            n != 4 + m->cgroup_dirfd + m->n_cgroup_procs + m->deps_fd + m->report_fd + m->netns_fd)
                return -EBADMSG;
        struct zygote_fds f = {.sync = fds[0], .code = fds[1], .out = fds[2], .err = fds[3]};
        size_t i = 4;
        f.cgroup_dirfd = m->cgroup_dirfd ? fds[i++] : -1;
        for (size_t k = 0; k < 2; k++)
                f.cgroup_procs[k] = k < m->n_cgroup_procs ? fds[i++] : -1;
        f.deps = m->deps_fd ? fds[i++] : -1;
        f.report = m->report_fd ? fds[i++] : -1;
        f.netns = m->netns_fd ? fds[i++] : -1;
        *ret = f;
        return 0;
}
