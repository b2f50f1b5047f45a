/* The shell side's figures (see stats.h). Only the jailer's loop calls
 * these, so the page's atomics have one writer; the HTTP process reads
 * them whenever it renders /metrics or /ready. */
#include "shell/stats.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "base/clock.h"
#include "config/config.h"

static struct {
        struct shell_figures *f;
        const struct config *cfg;
} st;

void shell_stats_attach(struct shared_stats *page, const struct config *cfg)
{
        st.f = page ? &page->shell : NULL;
        st.cfg = cfg;
        if (st.f)
                atomic_store(&st.f->enabled, 1);
}

static bool counted_live(uint32_t status)
{
        return status == SHELL_STARTING || status == SHELL_RUNNING;
}

static void observe_duration(uint64_t ms)
{
        size_t b = 0;
        while (b < STATS_SHELL_BUCKETS && ms > stats_shell_bucket_ms[b])
                b++;
        atomic_fetch_add(&st.f->duration[b], 1);
        atomic_fetch_add(&st.f->duration_sum_ms, ms);
        atomic_fetch_add(&st.f->duration_count, 1);
}

void shell_stats_status(uint32_t from, uint32_t to, int64_t *started_ms, uint64_t output)
{
        if (!st.f || from == to || to >= STATS_SHELL_STATUSES)
                return;
        int64_t now = monotonic_ms();
        if (counted_live(to) && *started_ms == 0)
                *started_ms = now;
        if (counted_live(from))
                atomic_fetch_sub(&st.f->live[from], 1);
        if (counted_live(to))
                atomic_fetch_add(&st.f->live[to], 1);
        if (!SHELL_STATUS_TERMINAL(to))
                return;
        atomic_fetch_add(&st.f->ended[to], 1);
        observe_duration(*started_ms > 0 && now > *started_ms ? (uint64_t)(now - *started_ms) : 0);
        atomic_fetch_add(&st.f->output_bytes, output);
        /* the keeper stops writing at shell.max_output (a PTY job's output
         * then ends with a notice past it) */
        if (st.cfg && st.cfg->shell_max_output > 0 && output >= (uint64_t)st.cfg->shell_max_output)
                shell_stats_limit(STATS_SHELL_OUTPUT);
}

void shell_stats_start(bool spare)
{
        if (st.f)
                atomic_fetch_add(&st.f->starts[spare], 1);
}

void shell_stats_limit(enum stats_shell_limit which)
{
        if (st.f && which < STATS_SHELL_LIMITS)
                atomic_fetch_add(&st.f->limits[which], 1);
}

void shell_stats_snapshot(enum stats_shell_snapshot route, bool ok)
{
        if (st.f && route < STATS_SHELL_SNAPSHOTS)
                atomic_fetch_add(&st.f->snapshots[route][ok], 1);
}

/* A directory on a file system that is not read-only. */
static bool dir_usable(const char *path, struct statvfs *ret)
{
        struct stat s;
        return stat(path, &s) == 0 && S_ISDIR(s.st_mode) && statvfs(path, ret) == 0 &&
               !(ret->f_flag & ST_RDONLY);
}

/* shell.home is the mount point of its own file system: another device
 * than the directory above it. */
static bool home_mounted(const char *home)
{
        char parent[PATH_MAX];
        struct stat a, b;
        if ((size_t)snprintf(parent, sizeof(parent), "%s/..", home) >= sizeof(parent))
                return false;
        return stat(home, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

static enum stats_shell_state check(long long *ret_free)
{
        struct statvfs vh, vj;
        char jobs[PATH_MAX];
        if (!dir_usable(st.cfg->shell_home, &vh))
                return STATS_SHELL_HOME_UNUSABLE;
        *ret_free = (long long)(vh.f_bavail * vh.f_frsize);
        if (st.cfg->shell_disk_bytes > 0 && !home_mounted(st.cfg->shell_home))
                return STATS_SHELL_DISK_UNMOUNTED;
        if ((size_t)snprintf(jobs, sizeof(jobs), "%s/jobs", st.cfg->shell_state_dir) >=
                sizeof(jobs) ||
            !dir_usable(jobs, &vj))
                return STATS_SHELL_JOBS_UNUSABLE;
        return STATS_SHELL_OK;
}

void shell_stats_publish(void)
{
        if (!st.f || !st.cfg)
                return;
        long long free_bytes = 0;
        enum stats_shell_state s = check(&free_bytes);
        atomic_store(&st.f->home_free_bytes, free_bytes);
        atomic_store(&st.f->state, s);
}
