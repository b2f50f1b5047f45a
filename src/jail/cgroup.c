/* cgroup v1/v2 handling for runs (see cgroup.h). Layout: the daemon's own
 * group O gets a child "lockbox.<pid>" holding one group per UID of the
 * pool ("slot"), made at the UID's first run and kept, emptied, for its
 * next ones; all are removed when the daemon stops. On v2 the daemon first moves itself to the leaf
 * "lockboxd.<pid>" so O may delegate controllers (no internal processes). */
#include "jail/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "base/util.h"

enum { H_MEMORY, H_PIDS, H_MAX };

struct cgroup_root {
        enum cgroup_mode mode;
        char *parent[H_MAX]; /* v2: only [H_MEMORY] is used (unified) */
        /* "lockbox-shell-<tag>" beside it (cgroup_shell_parent): shell
         * jobs' groups, which outlive a daemon (not named after it, and no
         * start removes them as stale: the shell side sweeps what it did
         * not adopt); bases[] is where both lie */
        char *bases[H_MAX], *shell[H_MAX];
        /* v1's cpu hierarchy, if mounted: only shell groups use it, for
         * their CPU weight (cgroup_limits.cpu_weight) */
        char *cpu_base, *shell_cpu;
        /* v2: the group the daemon started in, the leaf it moved to, and
         * which of memory/pids it enabled for the base's children itself
         * (to undo on the way out). */
        char *base, *self;
        bool enabled_memory, enabled_pids;
};

struct cgroup_run {
        struct cgroup_root *root;
        char *dir[H_MAX];
        char *cpu_dir; /* v1: its group in the cpu hierarchy, or NULL */
        int dirfd;
        uint64_t oom_base; /* OOM kills the slot saw before this run */
};

static int write_file(const char *dir, const char *file, const char *value)
{
        char path[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
                return -ENAMETOOLONG;
        return file_write(path, value, 0, 0); /* a short write is -EIO, never -0 */
}

static int read_file(const char *dir, const char *file, char *buf, size_t size)
{
        char path[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
                return -ENAMETOOLONG;
        ssize_t n = file_read_buf(path, buf, size);
        return n < 0 ? (int)n : 0;
}

/* "key value" lines (memory.events, memory.oom_control). */
uint64_t cgroup_read_keyed(const char *dir, const char *file, const char *key)
{
        char buf[4096];
        if (read_file(dir, file, buf, sizeof(buf)) < 0)
                return 0;
        size_t kl = strlen(key);
        for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
                        return strtoull(l + kl + 1, NULL, 10);
        return 0;
}

static uint64_t read_u64(const char *dir, const char *file)
{
        char buf[64];
        if (read_file(dir, file, buf, sizeof(buf)) < 0)
                return 0;
        return strtoull(buf, NULL, 10);
}

/* Mount point of the v1 hierarchy carrying `controller`, or of cgroup2,
 * and (ret_root) which directory of the hierarchy is mounted there: not
 * "/" when a container sees the host's cgroup paths (no cgroup namespace)
 * but only its own part of the tree. */
static char *find_mount(const char *fstype, const char *controller, char **ret_root)
{
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return NULL;
        char *line = NULL, *found = NULL;
        size_t cap = 0;
        while (!found && getline(&line, &cap, f) > 0) {
                char root[1024], mnt[1024], type[64], opts[1024];
                char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) != 2 ||
                    sscanf(sep + 3, "%63s %*s %1023s", type, opts) != 2)
                        continue;
                if (strcmp(type, fstype) != 0)
                        continue;
                if (controller) {
                        bool has = false;
                        for (char *s = NULL, *t = strtok_r(opts, ",", &s); t;
                             t = strtok_r(NULL, ",", &s))
                                has |= strcmp(t, controller) == 0;
                        if (!has)
                                continue;
                }
                found = strdup(mnt);
                if (found && !(*ret_root = strdup(root))) {
                        free(found);
                        found = NULL;
                }
        }
        free(line);
        fclose(f);
        return found;
}

/* own (from /proc/self/cgroup) as a path below a mount of root, or NULL
 * when the mount does not show it. */
static const char *below_root(const char *own, const char *root)
{
        size_t n = strlen(root);
        if (strcmp(root, "/") == 0)
                return own;
        if (strncmp(own, root, n) != 0 || (own[n] != '/' && own[n] != '\0'))
                return NULL;
        return own[n] ? own + n : "/";
}

/* This process's path in the hierarchy named by `key` ("memory", "pids",
 * or "" for the unified line "0::/path"). */
static char *own_path(const char *key)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return NULL;
        char *line = NULL, *found = NULL;
        size_t cap = 0;
        while (!found && getline(&line, &cap, f) > 0) {
                line[strcspn(line, "\n")] = '\0';
                char *c1 = strchr(line, ':');
                char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = '\0';
                bool match = *key ? false : (c1[1] == '\0' && strncmp(line, "0", 1) == 0);
                for (char *s = NULL, *t = *key ? strtok_r(c1 + 1, ",", &s) : NULL; t;
                     t = strtok_r(NULL, ",", &s))
                        match |= strcmp(t, key) == 0;
                if (match)
                        found = strdup(c2 + 1);
        }
        free(line);
        fclose(f);
        return found;
}

static char *path_join3(const char *a, const char *b, const char *c)
{
        char *p;
        if (asprintf(&p, "%s%s%s%s", a, strcmp(b, "/") == 0 ? "" : b, *c ? "/" : "", c) < 0)
                return NULL;
        return p;
}

static bool pid_is_lockboxd(pid_t pid)
{
        char path[64], comm[32] = "";
        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        return read_file(path, "comm", comm, sizeof(comm)) == 0 &&
               strncmp(comm, "lockboxd", 8) == 0;
}

/* Kill every process in a group and remove it (bounded wait). */
static int kill_and_remove(const char *dir)
{
        for (int attempt = 0; attempt < 200; attempt++) {
                char buf[8192];
                if (read_file(dir, "cgroup.procs", buf, sizeof(buf)) == 0)
                        for (char *s = NULL, *t = strtok_r(buf, "\n", &s); t;
                             t = strtok_r(NULL, "\n", &s))
                                kill((pid_t)atoi(t), SIGKILL);
                if (rmdir(dir) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        return -errno;
                nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        }
        return -EBUSY;
}

static void remove_children(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                        _cleanup_free_ char *s = path_join3(dir, "", de->d_name);
                        if (s && kill_and_remove(s) < 0)
                                log_warn(NULL, "cgroup.remove_failed", "path=%s", log_q(s));
                }
        if (d)
                closedir(d);
}

/* Remove "lockbox.<pid>" (and v2 "lockboxd.<pid>") groups whose daemon is
 * gone: a crash or SIGKILL of an earlier daemon must not leak groups. */
static void clean_stale(const char *base)
{
        DIR *d = opendir(base);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                int pid;
                if (sscanf(de->d_name, "lockbox.%d", &pid) != 1 &&
                    sscanf(de->d_name, "lockboxd.%d", &pid) != 1)
                        continue;
                if (pid == getpid() || pid_is_lockboxd(pid))
                        continue;
                _cleanup_free_ char *dir = path_join3(base, "", de->d_name);
                if (dir)
                        remove_children(dir);
                if (dir && kill_and_remove(dir) == 0)
                        log_warn(NULL, "cgroup.stale_removed", "path=%s", log_q(dir));
        }
        closedir(d);
}

static int open_v1(struct cgroup_root *root)
{
        static const char *const names[H_MAX] = {"memory", "pids"};
        for (int h = 0; h < H_MAX; h++) {
                _cleanup_free_ char *mroot = NULL;
                _cleanup_free_ char *mnt = find_mount("cgroup", names[h], &mroot);
                _cleanup_free_ char *own = own_path(names[h]);
                const char *rel = mnt && own ? below_root(own, mroot) : NULL;
                if (!rel)
                        return -ENOENT;
                _cleanup_free_ char *base = path_join3(mnt, rel, "");
                if (!base)
                        return -ENOMEM;
                clean_stale(base);
                char leaf[64];
                snprintf(leaf, sizeof(leaf), "lockbox.%d", (int)getpid());
                root->parent[h] = path_join3(base, "", leaf);
                root->bases[h] = strdup(base);
                if (!root->parent[h] || !root->bases[h])
                        return -ENOMEM;
                if (mkdir(root->parent[h], 0700) < 0 && errno != EEXIST)
                        return -errno;
        }
        _cleanup_free_ char *mroot = NULL;
        _cleanup_free_ char *mnt = find_mount("cgroup", "cpu", &mroot);
        _cleanup_free_ char *own = own_path("cpu");
        const char *rel = mnt && own ? below_root(own, mroot) : NULL;
        if (rel)
                root->cpu_base = path_join3(mnt, rel, "");
        return 0;
}

static bool has_word(const char *list, const char *word)
{
        size_t n = strlen(word);
        for (const char *p = strstr(list, word); p; p = strstr(p + 1, word))
                if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
                        return true;
        return false;
}

static int open_v2(struct cgroup_root *root, const char *mnt, const char *mroot)
{
        _cleanup_free_ char *own = own_path("");
        const char *rel = own ? below_root(own, mroot) : NULL;
        if (!rel)
                return -ENOENT;
        char *base = path_join3(mnt, rel, "");
        char ctl[512], sub[512];
        root->base = base;
        if (!base || read_file(base, "cgroup.controllers", ctl, sizeof(ctl)) < 0 ||
            !has_word(ctl, "memory") || !has_word(ctl, "pids") ||
            read_file(base, "cgroup.subtree_control", sub, sizeof(sub)) < 0)
                return -ENOENT;
        clean_stale(base);
        char name[64];
        snprintf(name, sizeof(name), "lockboxd.%d", (int)getpid());
        root->self = path_join3(base, "", name);
        snprintf(name, sizeof(name), "lockbox.%d", (int)getpid());
        root->parent[H_MEMORY] = path_join3(base, "", name);
        root->bases[H_MEMORY] = strdup(base);
        if (!root->self || !root->parent[H_MEMORY] || !root->bases[H_MEMORY])
                return -ENOMEM;
        int r;
        if ((mkdir(root->self, 0700) < 0 && errno != EEXIST) ||
            (mkdir(root->parent[H_MEMORY], 0700) < 0 && errno != EEXIST))
                return -errno;
        root->enabled_memory = !has_word(sub, "memory");
        root->enabled_pids = !has_word(sub, "pids");
        if ((r = write_file(root->self, "cgroup.procs", "0")) < 0 ||
            (r = write_file(base, "cgroup.subtree_control", "+memory +pids")) < 0 ||
            (r = write_file(root->parent[H_MEMORY], "cgroup.subtree_control", "+memory +pids")) < 0)
                return r;
        return 0;
}

/* v2, on the way out: the daemon cannot remove the leaf it is in, so it
 * gives the base back the controllers it enabled there (a group that
 * delegates controllers may hold no process), moves back into the base,
 * and removes the leaf. Everything else of the daemon has exited by now. */
static void leave_v2(struct cgroup_root *root)
{
        char off[32] = "";
        /* shell jobs kept running in groups below the base need them */
        if (root->shell[H_MEMORY] && access(root->shell[H_MEMORY], F_OK) == 0)
                root->enabled_memory = root->enabled_pids = false;
        if (root->enabled_memory)
                strcat(off, "-memory ");
        if (root->enabled_pids)
                strcat(off, "-pids");
        if (*off && write_file(root->base, "cgroup.subtree_control", off) < 0)
                log_warn(NULL, "cgroup.restore_failed", "path=%s error=%s", log_q(root->base),
                         log_q(strerror(errno)));
        if (write_file(root->base, "cgroup.procs", "0") < 0 ||
            (rmdir(root->self) < 0 && errno != ENOENT))
                log_warn(NULL, "cgroup.remove_failed", "path=%s error=%s", log_q(root->self),
                         log_q(strerror(errno)));
}

int cgroup_root_open(struct cgroup_root **ret)
{
        struct cgroup_root *root = calloc(1, sizeof(*root));
        if (!root)
                return -ENOMEM;
        _cleanup_free_ char *mroot = NULL;
        _cleanup_free_ char *unified = find_mount("cgroup2", NULL, &mroot);
        int r = -ENOENT;
        if (unified && strcmp(unified, "/sys/fs/cgroup") == 0) {
                r = open_v2(root, unified, mroot);
                root->mode = r == 0 ? CGROUP_V2 : CGROUP_NONE;
        } else {
                r = open_v1(root);
                root->mode = r == 0 ? CGROUP_V1 : CGROUP_NONE;
        }
        if (r < 0) {
                log_warn(NULL, "cgroup.unavailable",
                         "reason=%s effect=\"memory and task limits by rlimits only\"",
                         log_q(strerror(-r)));
                for (int h = 0; h < H_MAX; h++) {
                        if (root->parent[h])
                                rmdir(root->parent[h]);
                        free(root->parent[h]);
                        free(root->bases[h]);
                        root->parent[h] = root->bases[h] = NULL;
                }
                if (root->base && root->self && access(root->self, F_OK) == 0)
                        leave_v2(root); /* it may have moved there already */
        }
        *ret = root;
        return 0;
}

struct cgroup_root *cgroup_root_free(struct cgroup_root *root)
{
        if (!root)
                return NULL;
        for (int h = 0; h < H_MAX; h++) {
                if (root->parent[h])
                        remove_children(root->parent[h]);
                if (root->parent[h] && rmdir(root->parent[h]) < 0 && errno != ENOENT)
                        log_warn(NULL, "cgroup.remove_failed", "path=%s error=%s",
                                 log_q(root->parent[h]), log_q(strerror(errno)));
                free(root->parent[h]);
                /* stays while shell jobs live on in it (EBUSY) */
                if (root->shell[h])
                        rmdir(root->shell[h]);
                free(root->shell[h]);
                free(root->bases[h]);
        }
        if (root->shell_cpu)
                rmdir(root->shell_cpu);
        free(root->shell_cpu);
        free(root->cpu_base);
        if (root->mode == CGROUP_V2 && root->base && root->self)
                leave_v2(root);
        free(root->base);
        free(root->self);
        free(root);
        return NULL;
}

enum cgroup_mode cgroup_root_mode(const struct cgroup_root *root)
{
        return root->mode;
}

const char *cgroup_root_path(const struct cgroup_root *root)
{
        return root->parent[H_MEMORY];
}

static int set_limits_v1(struct cgroup_run *run, const struct cgroup_limits *l)
{
        /* v1 counts socket buffers only once a TCP limit is set, and then
         * apart from memory.limit_in_bytes: the budget is split between
         * the two (CGROUP_V1_TCP_BYTES), so a run holds at most its limit
         * in all and no run can push the host's tcp_mem into pressure.
         * (v2 counts them in memory.max with the rest.) */
        char v[32];
        long long tcp = CGROUP_V1_TCP_BYTES(l->memory_bytes);
        snprintf(v, sizeof(v), "%lld", (long long)l->memory_bytes - tcp);
        int r = write_file(run->dir[H_MEMORY], "memory.limit_in_bytes", v);
        if (r < 0)
                return r;
        /* memsw exists only with swap accounting; equal to the memory
         * limit it means "no swap". */
        r = write_file(run->dir[H_MEMORY], "memory.memsw.limit_in_bytes", v);
        if (r < 0 && r != -ENOENT)
                return r;
        snprintf(v, sizeof(v), "%lld", tcp);
        r = write_file(run->dir[H_MEMORY], "memory.kmem.tcp.limit_in_bytes", v);
        if (r < 0 && r != -ENOENT)
                return r;
        snprintf(v, sizeof(v), "%d", l->pids);
        return write_file(run->dir[H_PIDS], "pids.max", v);
}

static int set_limits_v2(struct cgroup_run *run, const struct cgroup_limits *l)
{
        char v[32];
        const char *d = run->dir[H_MEMORY];
        snprintf(v, sizeof(v), "%lld", (long long)l->memory_bytes);
        int r = write_file(d, "memory.max", v);
        if (r >= 0)
                r = write_file(d, "memory.swap.max", "0");
        if (r == -ENOENT)
                r = 0; /* no swap controller: nothing to cap */
        if (r >= 0)
                r = write_file(d, "memory.oom.group", "1");
        if (r >= 0) {
                snprintf(v, sizeof(v), "%d", l->pids);
                r = write_file(d, "pids.max", v);
        }
        if (r < 0)
                return r;
        run->dirfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return run->dirfd < 0 ? -errno : 0;
}

static uint64_t oom_kills(const struct cgroup_run *run)
{
        const char *d = run->dir[H_MEMORY];
        if (run->root->mode == CGROUP_V1)
                return cgroup_read_keyed(d, "memory.oom_control", "oom_kill");
        return cgroup_read_keyed(d, "memory.events", "oom_kill");
}

/* A slot group that served an earlier run of the same UID: empty (its
 * processes were reaped), so only its counters need a fresh start. */
static void reset_slot(struct cgroup_run *run)
{
        if (run->root->mode == CGROUP_V1) {
                write_file(run->dir[H_MEMORY], "memory.max_usage_in_bytes", "0");
                write_file(run->dir[H_MEMORY], "memory.failcnt", "0");
        }
        run->oom_base = oom_kills(run);
}

static int create_in(struct cgroup_root *root, char *const parent[H_MAX], const char *name,
                     const struct cgroup_limits *l, struct cgroup_run **ret)
{
        struct cgroup_run *run = calloc(1, sizeof(*run));
        if (!run)
                return -ENOMEM;
        run->root = root;
        run->dirfd = -1;
        int nh = root->mode == CGROUP_V1 ? H_MAX : root->mode == CGROUP_V2 ? 1 : 0;
        int r = 0;
        bool fresh = true;
        for (int h = 0; h < nh && r == 0; h++) {
                run->dir[h] = path_join3(parent[h], "", name);
                if (!run->dir[h])
                        r = -ENOMEM;
                else if (mkdir(run->dir[h], 0700) < 0 && errno != EEXIST)
                        r = -errno;
                else if (errno == EEXIST)
                        fresh = false;
        }
        if (r == 0 && root->mode == CGROUP_V1)
                r = set_limits_v1(run, l);
        else if (r == 0 && root->mode == CGROUP_V2)
                r = set_limits_v2(run, l);
        if (r == 0 && !fresh)
                reset_slot(run);
        if (r < 0) {
                cgroup_run_destroy(run);
                cgroup_run_free(run);
                return r;
        }
        *ret = run;
        return 0;
}

int cgroup_run_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *l,
                      struct cgroup_run **ret)
{
        return create_in(root, root->parent, name, l, ret);
}

int cgroup_shell_parent(struct cgroup_root *root, const char *tag)
{
        char name[128];
        snprintf(name, sizeof(name), "lockbox-shell-%s", tag);
        for (int h = 0; h < H_MAX; h++) {
                free(root->shell[h]);
                root->shell[h] = NULL;
                if (root->bases[h] && !(root->shell[h] = path_join3(root->bases[h], "", name)))
                        return -ENOMEM;
        }
        free(root->shell_cpu);
        root->shell_cpu = NULL;
        if (root->cpu_base && !(root->shell_cpu = path_join3(root->cpu_base, "", name)))
                return -ENOMEM;
        return 0;
}

/* The group above name's last part, below top ("top/shell-b3" for
 * "shell-b3/<job>"), or top itself for a name of one part. */
static char *upper(const char *top, const char *name)
{
        const char *slash = strchr(name, '/');
        if (!slash)
                return strdup(top);
        char up[256];
        snprintf(up, sizeof(up), "%.*s", (int)(slash - name), name);
        return path_join3(top, "", up);
}

/* v2: the groups between top and name hand controllers down (they hold
 * no process: jobs are in leaves). */
static void hand_down(const char *top, const char *name, const char *controllers)
{
        write_file(top, "cgroup.subtree_control", controllers);
        _cleanup_free_ char *up = strchr(name, '/') ? upper(top, name) : NULL;
        if (up)
                write_file(up, "cgroup.subtree_control", controllers);
}

/* The group's CPU weight: v1 a group of the cpu hierarchy beside its
 * memory and pids ones (its parents made first, as those are), v2
 * cpu.weight where the cpu controller is there to hand down. Best
 * effort: a host without the controller shares CPU as before. */
static void set_cpu_weight(struct cgroup_run *run, const char *name, int weight)
{
        struct cgroup_root *root = run->root;
        char v[32];
        if (root->mode == CGROUP_V2) {
                hand_down(root->shell[H_MEMORY], name, "+cpu");
                snprintf(v, sizeof(v), "%d", weight);
                write_file(run->dir[H_MEMORY], "cpu.weight", v);
                return;
        }
        if (root->mode != CGROUP_V1 || !root->shell_cpu ||
            (mkdir(root->shell_cpu, 0700) < 0 && errno != EEXIST))
                return;
        _cleanup_free_ char *up = upper(root->shell_cpu, name);
        if (!up || (mkdir(up, 0700) < 0 && errno != EEXIST))
                return;
        run->cpu_dir = path_join3(root->shell_cpu, "", name);
        if (!run->cpu_dir || (mkdir(run->cpu_dir, 0700) < 0 && errno != EEXIST)) {
                free(run->cpu_dir);
                run->cpu_dir = NULL;
                return;
        }
        long long shares = (long long)weight * 1024 / 100;
        snprintf(v, sizeof(v), "%lld", shares < 2 ? 2 : shares);
        write_file(run->cpu_dir, "cpu.shares", v);
}

int cgroup_shell_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *l,
                        struct cgroup_run **ret)
{
        int nh = root->mode == CGROUP_V1 ? H_MAX : root->mode == CGROUP_V2 ? 1 : 0;
        for (int h = 0; h < nh; h++)
                if (!root->shell[h] || (mkdir(root->shell[h], 0700) < 0 && errno != EEXIST))
                        return root->shell[h] ? -errno : -ENOENT;
        if (root->mode == CGROUP_V2)
                hand_down(root->shell[H_MEMORY], name, "+memory +pids");
        int r = create_in(root, root->shell, name, l, ret);
        if (r == 0 && l->cpu_weight > 0)
                set_cpu_weight(*ret, name, l->cpu_weight);
        return r;
}

int cgroup_shell_hold(struct cgroup_root *root, const char *binding, pid_t pid)
{
        int nh = root->mode == CGROUP_V1 ? H_MAX : root->mode == CGROUP_V2 ? 1 : 0;
        char v[32], rel[128];
        snprintf(v, sizeof(v), "%d", (int)pid);
        snprintf(rel, sizeof(rel), "%s/holders", binding);
        for (int h = 0; h < nh; h++) {
                _cleanup_free_ char *leaf =
                    root->shell[h] ? path_join3(root->shell[h], "", rel) : NULL;
                if (!leaf)
                        return -ENOMEM;
                int r = mkdir(leaf, 0700) < 0 && errno != EEXIST ? -errno : 0;
                if (r == 0)
                        r = write_file(leaf, "cgroup.procs", v);
                if (r < 0)
                        return r;
        }
        return 0;
}

void cgroup_shell_unhold(struct cgroup_root *root, const char *binding)
{
        char rel[128];
        snprintf(rel, sizeof(rel), "%s/holders", binding);
        for (int h = 0; h < H_MAX; h++) {
                _cleanup_free_ char *leaf =
                    root->shell[h] ? path_join3(root->shell[h], "", rel) : NULL;
                if (leaf && kill_and_remove(leaf) < 0)
                        log_warn(NULL, "cgroup.remove_failed", "path=%s", log_q(leaf));
        }
}

/* Each group below dir (one level), by its path relative to the shell
 * parent: kept, or emptied and removed with what it holds. */
static void sweep_dir(const char *top, const char *rel, bool (*keep)(const char *, void *),
                      void *data, int depth)
{
        _cleanup_free_ char *dir = path_join3(top, *rel ? "/" : "", rel);
        DIR *d = dir ? opendir(dir) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                char sub[512];
                snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
                if (keep(sub, data)) {
                        if (depth > 1)
                                sweep_dir(top, sub, keep, data, depth - 1);
                        continue;
                }
                _cleanup_free_ char *path = path_join3(top, "/", sub);
                if (path)
                        remove_children(path);
                if (path && kill_and_remove(path) == 0)
                        log_warn(NULL, "cgroup.stale_removed", "path=%s", log_q(path));
        }
        if (d)
                closedir(d);
}

void cgroup_shell_sweep(struct cgroup_root *root, bool (*keep)(const char *rel, void *data),
                        void *data)
{
        for (int h = 0; h < H_MAX; h++)
                if (root->shell[h])
                        sweep_dir(root->shell[h], "", keep, data, 2);
        if (root->shell_cpu)
                sweep_dir(root->shell_cpu, "", keep, data, 2);
}

int cgroup_run_dirfd(const struct cgroup_run *run)
{
        return run->dirfd;
}

int cgroup_run_procs_fds(const struct cgroup_run *run, int ret[2])
{
        ret[0] = ret[1] = -1;
        if (run->root->mode != CGROUP_V1)
                return 0;
        for (int h = 0; h < H_MAX; h++) {
                char path[4096];
                int e = ENAMETOOLONG;
                if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", run->dir[h]) <
                    sizeof(path)) {
                        ret[h] = open(path, O_WRONLY | O_CLOEXEC);
                        e = errno;
                }
                if (ret[h] < 0) {
                        ret[0] = safe_close(ret[0]);
                        return -e;
                }
        }
        return 0;
}

int cgroup_run_cpu_procs_fd(const struct cgroup_run *run)
{
        char path[4096];
        if (!run || !run->cpu_dir ||
            (size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", run->cpu_dir) >= sizeof(path))
                return -1;
        return open(path, O_WRONLY | O_CLOEXEC);
}

int cgroup_run_stats(const struct cgroup_run *run, struct cgroup_stats *ret)
{
        struct cgroup_stats s = {0};
        const char *d = run->dir[H_MEMORY];
        if (run->root->mode != CGROUP_NONE)
                s.oom_kills = oom_kills(run) - run->oom_base;
        if (run->root->mode == CGROUP_V1)
                s.memory_peak = read_u64(d, "memory.max_usage_in_bytes");
        else if (run->root->mode == CGROUP_V2)
                s.memory_peak = read_u64(d, "memory.peak");
        *ret = s;
        return 0;
}

/* The slot's groups stay for the UID's next run (removing a memory group
 * costs 3-20 ms of the caller's time on cgroup v1); they must be empty.
 * -EBUSY if something could not be killed: then the UID must not be
 * reused. */
int cgroup_run_destroy(struct cgroup_run *run)
{
        run->dirfd = safe_close(run->dirfd);
        for (int h = 0; h < H_MAX; h++) {
                char buf[64];
                if (!run->dir[h] || read_file(run->dir[h], "cgroup.procs", buf, sizeof(buf)) < 0 ||
                    !buf[0])
                        continue;
                if (kill_and_remove(run->dir[h]) < 0)
                        return -EBUSY;
        }
        return 0;
}

int cgroup_run_remove(struct cgroup_run *run)
{
        int r = 0;
        run->dirfd = safe_close(run->dirfd);
        for (int h = 0; h < H_MAX; h++)
                if (run->dir[h] && kill_and_remove(run->dir[h]) < 0)
                        r = -EBUSY;
        if (run->cpu_dir && kill_and_remove(run->cpu_dir) < 0)
                r = -EBUSY;
        return r;
}

int cgroup_run_count(const struct cgroup_run *run)
{
        char buf[8192];
        int n = 0;
        if (!run->dir[0])
                return 0;
        int r = read_file(run->dir[0], "cgroup.procs", buf, sizeof(buf));
        if (r < 0)
                return r;
        for (char *p = buf; *p; p++)
                n += *p == '\n';
        return n ? n : buf[0] != '\0';
}

struct cgroup_run *cgroup_run_free(struct cgroup_run *run)
{
        if (run) {
                safe_close(run->dirfd);
                for (int h = 0; h < H_MAX; h++)
                        free(run->dir[h]);
                free(run->cpu_dir);
                free(run);
        }
        return NULL;
}
