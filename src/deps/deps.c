/* The Python dependency layer (docs/API.md, docs/ARCHITECTURE.md): packages named in the
 * requirements file, installed by pip into a directory of their own under
 * dependencies.layer_dir, never into the system Python. Installs run in the
 * background as an unprivileged UID of their own (the last of the jail's
 * range, config_installer_uid: not server.user, the HTTP process's, which
 * can ask for installs), wheels only unless allowed
 * otherwise; a finished layer is made root's and read-only, and `current`
 * switches to it atomically. Runs bind the layer that was current when they
 * started, read-only, at /opt/lockbox/python; a layer no run uses any more
 * is removed. A failed install keeps the previous layer and says why in
 * status.json, which the HTTP process reads for the dependency routes and
 * /ready. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <grp.h>
#include <jansson.h>
#include <linux/mount.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/file.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "ipc/proto.h"
#include "deps/deps.h"
#include "deps/deps_tree.h"
#include "base/loop.h"

#define REQUIREMENTS_MAX (1 << 20)
#define PIP_LOG_MAX (64 * 1024)
#define MAX_WAITERS 32

struct layer {
        struct layer *next;
        char *name; /* "layer-<ms>" under the layer directory */
        unsigned refs;
};

struct deps {
        char *dir, *status_path;
        int dirfd; /* dependencies.layer_dir, root's: every tree below goes through it */
        uid_t uid;
        gid_t gid;
        struct layer *layers, *current;
        uint64_t hash;  /* of what `current` was built from */
        bool have_hash; /* false until an install or status.json tells it */
        bool attempted, ok;
        char message[1024];
        time_t last_time;
        json_t *installed;
        /* the install in progress */
        pid_t pid;
        int pidfd, out;
        struct strbuf log;
        char *staging;
        uint64_t job_hash;
        bool timed_out;         /* the running pip overran install_timeout */
        int64_t job_started_ms; /* monotonic_ms() */
        int waiters[MAX_WAITERS];
        size_t n_waiters;
        bool force_again;
        struct watch w_out, w_exit;
        time_t next_check;
        const struct config *cfg;
        struct loop *loop;
        /* told when `current` changes (deps_on_layer_switched) */
        void (*layer_switched)(void *data);
        void *layer_switched_data;
};

/* ---- small pieces (the pure text helpers are in deps_text.c) -------------------- */

static char *layer_path(const struct deps *d, const char *name)
{
        char *p;
        return asprintf(&p, "%s/%s", d->dir, name) < 0 ? NULL : p;
}

static int by_name(const void *a, const void *b)
{
        return strcasecmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                          json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

static void sort_by_name(json_t *arr)
{
        size_t n = json_array_size(arr);
        json_t **v = n ? calloc(n, sizeof(*v)) : NULL;
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                v[i] = json_incref(json_array_get(arr, i));
        qsort(v, n, sizeof(*v), by_name);
        json_array_clear(arr);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, v[i]);
        free(v);
}

/* The installed distributions, from the layer's own *.dist-info, by name. */
static json_t *scan_installed(const char *dir)
{
        json_t *arr = json_array();
        DIR *dd = opendir(dir);
        struct dirent *de;
        while (arr && dd && (de = readdir(dd))) {
                size_t n = strlen(de->d_name);
                if (n < 11 || strcmp(de->d_name + n - 10, ".dist-info") != 0)
                        continue;
                char path[4096], name[256], version[128];
                struct strbuf sb;
                struct stat st;
                if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
                        sizeof(path) ||
                    lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue; /* not through a symlink */
                if ((size_t)snprintf(path, sizeof(path), "%s/%s/METADATA", dir, de->d_name) >=
                        sizeof(path) ||
                    file_read(path, O_NOFOLLOW, 1 << 20, &sb) < 0) /* pip's files: untrusted */
                        continue;
                if (deps_parse_metadata(sb.data ? sb.data : "", name, sizeof(name), version,
                                        sizeof(version)) == 0)
                        json_array_append_new(
                            arr, json_pack("{s:s,s:s}", "name", name, "version", version));
                strbuf_free(&sb);
        }
        if (dd)
                closedir(dd);
        sort_by_name(arr);
        return arr;
}

/* rel below layer_dir ("layer-1", "layer-1/.home"), through descriptors
 * only (deps_tree.h): the installer's account wrote it. */
static void remove_tree(const struct deps *d, const char *rel)
{
        int r = deps_tree_remove(d->dirfd, rel);
        if (r < 0)
                log_warn(NULL, "deps.remove_failed", "path=%s/%s error=%s", log_q(d->dir),
                         log_q(rel), log_q(strerror(-r)));
}

/* ---- status.json, read by the HTTP process -------------------------------------- */

static void write_status(struct deps *d)
{
        char when[32] = "";
        struct tm tm;
        if (d->last_time && gmtime_r(&d->last_time, &tm))
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        char hash[24] = "";
        if (d->have_hash)
                snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)d->hash);
        json_t *st = json_pack("{s:b,s:b,s:s,s:s,s:s,s:O,s:s?,s:s}", "ready", d->attempted,
                               "installing", d->pid > 0, "status",
                               !d->attempted ? "pending"
                               : d->ok       ? "ok"
                                             : "failed",
                               "time", when, "message", d->message, "dependencies", d->installed,
                               "layer", d->current ? d->current->name : NULL, "hash", hash);
        char tmp[4096];
        if (!st || (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", d->status_path) >= sizeof(tmp) ||
            json_dump_file(st, tmp, JSON_COMPACT) < 0 || chmod(tmp, 0644) < 0 ||
            rename(tmp, d->status_path) < 0)
                log_error(NULL, "deps.status_failed", "path=%s", log_q(d->status_path));
        json_decref(st);
}

/* ---- layers and runs ------------------------------------------------------------- */

static struct layer *layer_new(struct deps *d, const char *name)
{
        struct layer *l = calloc(1, sizeof(*l));
        if (!l || !(l->name = strdup(name))) {
                free(l);
                return NULL;
        }
        l->next = d->layers;
        d->layers = l;
        return l;
}

/* Remove layers that are neither current nor bound by any run. */
static void collect(struct deps *d)
{
        for (struct layer **pp = &d->layers; *pp;) {
                struct layer *l = *pp;
                if (l == d->current || l->refs > 0) {
                        pp = &l->next;
                        continue;
                }
                remove_tree(d, l->name);
                *pp = l->next;
                free(l->name);
                free(l);
        }
}

int deps_layer_acquire(struct deps *d, struct layer **ret_layer, int *ret_fd)
{
        *ret_layer = NULL;
        *ret_fd = -1;
        if (!d || !d->current)
                return 0;
        /* A detached read-only copy of the layer's tree: the run attaches it
         * in its own mount namespace (a plain fd of our namespace's mount
         * cannot be bound from another one). */
        _cleanup_free_ char *p = layer_path(d, d->current->name);
        int fd =
            p ? (int)syscall(SYS_open_tree, AT_FDCWD, p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) : -1;
        /* not noexec: compiled extensions (numpy, ...) are mapped
         * executable; a run cannot execve anything anyway */
        struct mount_attr attr = {.attr_set =
                                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
        if (fd < 0 || syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                int e = errno;
                safe_close(fd);
                return -e;
        }
        d->current->refs++;
        *ret_layer = d->current;
        *ret_fd = fd;
        return 0;
}

bool deps_layer_is_current(const struct deps *d, const struct layer *l)
{
        return !d || l == d->current;
}

void deps_layer_release(struct deps *d, struct layer *l)
{
        if (!l || !d)
                return;
        l->refs--;
        if (l->refs == 0 && l != d->current)
                collect(d);
}

/* ---- installing -------------------------------------------------------------- */

static void answer_waiters(struct deps *d)
{
        struct proto_deps_done m = {.hdr = {PROTO_MAGIC, PROTO_DEPS_DONE}, .ok = d->ok};
        snprintf(m.message, sizeof(m.message), "%s", d->message);
        for (size_t i = 0; i < d->n_waiters; i++) {
                channel_send(d->waiters[i], &m, sizeof(m), NULL, 0);
                close(d->waiters[i]);
        }
        d->n_waiters = 0;
}

static void install_done(struct deps *d, bool ok, const char *message)
{
        d->attempted = true;
        d->ok = ok;
        d->last_time = time(NULL);
        snprintf(d->message, sizeof(d->message), "%s", message);
        if (ok)
                log_info(NULL, "deps.installed", "layer=%s packages=%zu",
                         log_q(d->current ? d->current->name : "none"),
                         json_array_size(d->installed));
        else
                log_error(NULL, "deps.install_failed", "error=%s", log_q(message));
        write_status(d);
        answer_waiters(d);
}

/* Make the finished staging directory the current layer. */
static int switch_to(struct deps *d, const char *name, uint64_t hash)
{
        char link[4096], tmp[4096];
        if ((size_t)snprintf(link, sizeof(link), "%s/current", d->dir) >= sizeof(link) ||
            (size_t)snprintf(tmp, sizeof(tmp), "%s/current.tmp", d->dir) >= sizeof(tmp))
                return -ENAMETOOLONG;
        struct layer *l = name ? layer_new(d, name) : NULL;
        if (name && !l)
                return -ENOMEM;
        unlink(tmp);
        if (name && (symlink(name, tmp) < 0 || rename(tmp, link) < 0))
                return -errno;
        if (!name)
                unlink(link);
        d->current = l;
        d->hash = hash;
        d->have_hash = true;
        collect(d);
        /* armed Python runs have the old layer bound: new runs get the new one */
        if (d->layer_switched)
                d->layer_switched(d->layer_switched_data);
        return 0;
}

static void on_pip_done(struct deps *d, int status)
{
        _cleanup_free_ char *staging = TAKE_PTR(d->staging);
        const char *name = staging ? strrchr(staging, '/') + 1 : NULL;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                char msg[1024], why[96];
                const char *tail = d->log.data ? d->log.data : "";
                size_t len = d->log.len;
                if (d->timed_out)
                        snprintf(why, sizeof(why), "did not finish within %llds (install_timeout)",
                                 (long long)d->cfg->install_timeout);
                else
                        snprintf(why, sizeof(why), "%s",
                                 WIFSIGNALED(status) ? "was killed" : "failed");
                snprintf(msg, sizeof(msg), "pip %s: %s", why, len > 900 ? tail + len - 900 : tail);
                if (staging)
                        remove_tree(d, name);
                install_done(d, false, msg);
                return;
        }
        char home[300];
        if ((size_t)snprintf(home, sizeof(home), "%s/.home", name) < sizeof(home))
                remove_tree(d, home);
        json_t *inst = NULL;
        int r = deps_tree_seal(d->dirfd, name, d->uid);
        if (r < 0)
                log_error(NULL, "deps.seal_failed", "layer=%s error=%s", log_q(name),
                          log_q(strerror(-r)));
        if (r < 0 || !(inst = scan_installed(staging)) || switch_to(d, name, d->job_hash) < 0) {
                json_decref(inst);
                remove_tree(d, name);
                install_done(d, false, "could not seal or switch to the new layer");
                return;
        }
        json_decref(d->installed);
        d->installed = inst;
        install_done(d, true, "");
}

/* Options pip_argv() adds to the fixed ones: at most --only-binary and
 * the mirror's four. */
#define PIP_ARGV_OPTIONAL 5

static char **pip_argv(const struct config *c, const char *staging)
{
        const char *fixed[] = {c->python_path,
                               "-m",
                               "pip",
                               "install",
                               "--no-input",
                               "--disable-pip-version-check",
                               "--no-cache-dir",
                               "--no-warn-script-location",
                               "--progress-bar",
                               "off",
                               "--target",
                               staging,
                               "-r",
                               ".home/requirements.txt"};
        char **v = calloc(ELEMENTSOF(fixed) + PIP_ARGV_OPTIONAL + 1, sizeof(char *));
        size_t n = 0;
        if (!v)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                v[n++] = (char *)fixed[i];
        if (!c->source_builds)
                v[n++] = (char *)"--only-binary=:all:";
        if (*c->wheel_dir) {
                v[n++] = (char *)"--no-index";
                v[n++] = (char *)"--find-links";
                v[n++] = c->wheel_dir;
        } else if (*c->python_pip_mirror_url) {
                v[n++] = (char *)"--index-url";
                v[n++] = c->python_pip_mirror_url;
                /* an http:// mirror works without more flags */
                if (strncmp(c->python_pip_mirror_url, "http://", 7) == 0) {
                        static char host[256];
                        int len = (int)strcspn(c->python_pip_mirror_url + 7, "/:@");
                        /* a host name is at most 253 bytes: else pip says what is wrong */
                        if ((size_t)snprintf(host, sizeof(host), "%.*s", len,
                                             c->python_pip_mirror_url + 7) < sizeof(host)) {
                                v[n++] = (char *)"--trusted-host";
                                v[n++] = host;
                        }
                }
        }
        return v;
}

/* What of lockboxd's environment reaches pip (never a run): pip's own
 * settings as operators give them (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
 * PIP_TRUSTED_HOST, PIP_CERT, PIP_FIND_LINKS... every PIP_*), proxy
 * exceptions and CA bundles. lockbox's own keys win: the proxies come from
 * proxy.* (HTTP_PROXY, HTTPS_PROXY), and python_pip_mirror_url and
 * dependencies.wheel_dir are command-line options, which pip prefers to
 * its environment. */
static bool passed_to_pip(const char *entry)
{
        static const char *const names[] = {
            "NO_PROXY=",     "no_proxy=",           "SSL_CERT_FILE=",
            "SSL_CERT_DIR=", "REQUESTS_CA_BUNDLE=", "CURL_CA_BUNDLE="};
        if (strncmp(entry, "PIP_", 4) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strncmp(entry, names[i], strlen(names[i])) == 0)
                        return true;
        return false;
}

/* Entries of pip's environment that are lockbox's own: PATH, LANG, HOME,
 * TMPDIR and the two proxies. */
#define PIP_OWN_ENV 6

/* The child: the installer's UID, no privileges, in the staging directory. */
static _Noreturn void pip_child(struct deps *d, int out, const char *staging)
{
        const struct config *c = d->cfg;
        /* pip's temporary files go into its HOME, in the staging tree: a
         * killed install leaves nothing in the host's /tmp */
        char home[4096], tmp[4096];
        if ((size_t)snprintf(home, sizeof(home), "HOME=%s/.home", staging) >= sizeof(home) ||
            (size_t)snprintf(tmp, sizeof(tmp), "TMPDIR=%s/.home", staging) >= sizeof(tmp))
                _exit(126);
        size_t n_environ = 0;
        for (char **e = environ; e && *e; e++)
                n_environ++;
        char **envp = calloc(n_environ + PIP_OWN_ENV + 1, sizeof(char *));
        if (!envp)
                _exit(126);
        size_t ne = 0;
        envp[ne++] = (char *)"PATH=/usr/local/bin:/usr/bin:/bin";
        envp[ne++] = (char *)"LANG=C.UTF-8";
        envp[ne++] = home;
        envp[ne++] = tmp;
        char hp[600], sp[600];
        /* a proxy that does not fit is no reason to go around it */
        if (*c->proxy_http) {
                if ((size_t)snprintf(hp, sizeof(hp), "HTTP_PROXY=%s", c->proxy_http) >= sizeof(hp))
                        _exit(126);
                envp[ne++] = hp;
        }
        if (*c->proxy_https) {
                if ((size_t)snprintf(sp, sizeof(sp), "HTTPS_PROXY=%s", c->proxy_https) >=
                    sizeof(sp))
                        _exit(126);
                envp[ne++] = sp;
        }
        for (char **e = environ; e && *e; e++)
                if (passed_to_pip(*e))
                        envp[ne++] = *e;
        char **argv = pip_argv(c, staging);
        sigset_t none;
        sigemptyset(&none);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (!argv || null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
            setgroups(0, NULL) < 0 || setresgid(d->gid, d->gid, d->gid) < 0 ||
            setresuid(d->uid, d->uid, d->uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || chdir(staging) < 0)
                _exit(126);
        fd_close_from(3);
        execve(argv[0], argv, envp);
        _exit(127);
}

static volatile pid_t pip_pid;

static void kill_pip(int sig)
{
        (void)sig;
        kill(pip_pid, SIGKILL);
}

/* pip runs as PID 1 of a namespace of its own: when it ends, the kernel
 * kills whatever it left behind (a source build's daemon, say), so nothing
 * running as the installer's UID can touch the layer while it is sealed. This
 * process waits and passes pip's status on. The jailer stops an install
 * with SIGTERM to this process, which kills pip and reaps it: were this
 * process killed first, pip would die an orphan, left to the host's init
 * to reap (a zombie of the installer's UID for as long as that takes). */
static _Noreturn void pip_reaper(struct deps *d, int out, const char *staging)
{
        /* the jailer's descriptors (runs' pipes, channels) are not pip's to
         * hold open */
        fd_close_all_except(3, &out, 1);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, NULL);
        if (unshare(CLONE_NEWPID) < 0)
                _exit(126);
        pid_t pid = fork();
        if (pid < 0)
                _exit(126);
        if (pid == 0)
                pip_child(d, out, staging);
        pip_pid = pid;
        sigaction(SIGTERM, &(struct sigaction){.sa_handler = kill_pip}, NULL);
        sigprocmask(SIG_UNBLOCK, &term, NULL); /* (the jailer's signalfd blocks it) */
        int status = 0;
        if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0)
                _exit(126);
        if (WIFSIGNALED(status))
                _exit(128 + WTERMSIG(status));
        _exit(WEXITSTATUS(status));
}

/* layer-<ms>/ for pip's --target, and in it .home/ (pip's HOME, holding a
 * copy of the requirements: the file itself need not be readable by
 * the installer), both the installer's until the layer is sealed. */
static int make_staging(struct deps *d, const struct strbuf *reqs, char **ret)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char name[64];
        snprintf(name, sizeof(name), "layer-%lld%03ld", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
        char *p;
        if (asprintf(&p, "%s/%s", d->dir, name) < 0)
                return -ENOMEM;
        /* Everything is made while it is root's, then given away through
         * descriptors: the installer's account never has a moment in which
         * a swapped entry could turn one of these calls elsewhere. */
        int dir = -1, home = -1, fd = -1, r = 0;
        if (mkdirat(d->dirfd, name, 0755) < 0 ||
            (dir = openat(d->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            mkdirat(dir, ".home", 0700) < 0 ||
            (home = openat(dir, ".home", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            (fd = openat(home, "requirements.txt",
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
            write(fd, reqs->data ? reqs->data : "", reqs->len) != (ssize_t)reqs->len ||
            fchown(fd, d->uid, d->gid) < 0 || fchown(home, d->uid, d->gid) < 0 ||
            fchown(dir, d->uid, d->gid) < 0)
                r = -(errno ? errno : EIO);
        safe_close(fd);
        safe_close(home);
        safe_close(dir);
        if (r < 0) {
                remove_tree(d, name);
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

static void on_output_event(void *data, uint32_t events);
static void on_exit_event(void *data, uint32_t events);

static int start_pip(struct deps *d, const struct strbuf *reqs)
{
        int out[2], r = make_staging(d, reqs, &d->staging);
        if (r < 0)
                return r;
        if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid == 0)
                pip_reaper(d, out[1], d->staging);
        close(out[1]);
        if (pid < 0) {
                close(out[0]);
                return -errno;
        }
        d->pid = pid;
        d->out = out[0];
        d->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        strbuf_init(&d->log, PIP_LOG_MAX);
        d->job_started_ms = monotonic_ms();
        d->timed_out = false;
        d->w_out = (struct watch){.fn = on_output_event, .data = d};
        d->w_exit = (struct watch){.fn = on_exit_event, .data = d};
        if ((r = loop_watch(d->loop, d->out, &d->w_out)) < 0 ||
            (r = loop_watch(d->loop, d->pidfd, &d->w_exit)) < 0)
                kill(pid, SIGKILL);
        log_info(NULL, "deps.installing", "pid=%d", (int)pid);
        return r;
}

/* Check the requirements and install if asked (force) or needed. */
static void check_and_install(struct deps *d, bool force)
{
        if (d->pid > 0) {
                d->force_again |= force;
                return;
        }
        struct strbuf reqs = {0};
        /* an empty path, like an absent file, means no packages */
        const char *path = d->cfg->python_requirements;
        int r = *path ? file_read(path, 0, REQUIREMENTS_MAX, &reqs) : -ENOENT;
        if (r == -ENOENT) {
                strbuf_init(&reqs, 0);
                r = 0;
        }
        if (r < 0) {
                char msg[256];
                snprintf(msg, sizeof(msg), "cannot read %s: %s", d->cfg->python_requirements,
                         strerror(-r));
                install_done(d, false, msg);
                return;
        }
        const struct config *c = d->cfg;
        uint64_t h = deps_hash(reqs.data ? reqs.data : "", reqs.len, 0xcbf29ce484222325ULL);
        h = deps_hash(c->python_pip_mirror_url, strlen(c->python_pip_mirror_url), h);
        h = deps_hash(c->wheel_dir, strlen(c->wheel_dir), h);
        h = deps_hash(c->source_builds ? "s" : "b", 1, h);
        if (!force && d->have_hash && h == d->hash) {
                /* the layer in place was built from this very file (maybe
                 * by an earlier life of the service): nothing to do */
                strbuf_free(&reqs);
                if (!d->attempted)
                        install_done(d, true, "");
                return;
        }
        d->job_hash = h;
        if (deps_requirements_empty(reqs.data ? reqs.data : "", reqs.len)) {
                strbuf_free(&reqs);
                /* nothing to fetch: no layer at all */
                json_decref(d->installed);
                d->installed = json_array();
                switch_to(d, NULL, h);
                install_done(d, true, "");
                return;
        }
        r = start_pip(d, &reqs);
        strbuf_free(&reqs);
        if (r < 0) {
                char msg[256];
                snprintf(msg, sizeof(msg), "cannot start pip: %s", strerror(-r));
                if (d->staging)
                        remove_tree(d, strrchr(d->staging, '/') + 1);
                free(TAKE_PTR(d->staging));
                install_done(d, false, msg);
        }
        write_status(d);
}

static void deps_on_output(struct deps *d)
{
        char buf[4096];
        ssize_t n;
        while ((n = read(d->out, buf, sizeof(buf))) > 0) {
                /* keep the tail: pip's error is at the end */
                if (strbuf_append(&d->log, buf, (size_t)n) < 0) {
                        size_t keep = d->log.len / 2;
                        memmove(d->log.data, d->log.data + d->log.len - keep, keep);
                        d->log.len = keep;
                        strbuf_append(&d->log, buf, (size_t)n);
                }
        }
        if (n == 0) {
                loop_unwatch(d->loop, d->out);
                d->out = safe_close(d->out);
        }
}

static void deps_on_exit(struct deps *d)
{
        int status = 0;
        if (RETRY_EINTR(waitpid(d->pid, &status, WNOHANG)) <= 0)
                return;
        if (d->out >= 0)
                deps_on_output(d);
        loop_unwatch(d->loop, d->pidfd);
        d->pidfd = safe_close(d->pidfd);
        d->out = safe_close(d->out);
        d->pid = 0;
        on_pip_done(d, status);
        strbuf_free(&d->log);
        if (d->force_again) {
                d->force_again = false;
                check_and_install(d, true);
        }
}

static void on_output_event(void *data, uint32_t events)
{
        deps_on_output(data);
}

static void on_exit_event(void *data, uint32_t events)
{
        deps_on_exit(data);
}

bool deps_owns(const struct deps *d, pid_t pid)
{
        return d && d->pid > 0 && d->pid == pid;
}

void deps_on_tick(struct deps *d)
{
        if (!d)
                return;
        if (d->pid > 0) {
                if (monotonic_ms() - d->job_started_ms >= d->cfg->install_timeout * 1000LL &&
                    !d->timed_out) {
                        d->timed_out = true;
                        syscall(SYS_pidfd_send_signal, d->pidfd, SIGTERM, NULL, 0);
                }
                return;
        }
        time_t now = time(NULL);
        if (!d->attempted || (d->cfg->python_deps_update_interval > 0 && now >= d->next_check)) {
                d->next_check = now + d->cfg->python_deps_update_interval;
                check_and_install(d, false);
        }
}

void deps_request(struct deps *d, int chan)
{
        if (d->n_waiters >= MAX_WAITERS) {
                struct proto_deps_done m = {.hdr = {PROTO_MAGIC, PROTO_DEPS_DONE}};
                snprintf(m.message, sizeof(m.message), "too many dependency updates waiting");
                channel_send(chan, &m, sizeof(m), NULL, 0);
                close(chan);
                return;
        }
        d->waiters[d->n_waiters++] = chan;
        if (d->pid > 0)
                d->force_again = true; /* after the one running, one with today's file */
        else
                check_and_install(d, true);
}

/* What status.json says `current` was built from, if it is about the
 * same layer (or about no layer, for an empty file). */
static void adopt_hash(struct deps *d)
{
        json_t *st = json_load_file(d->status_path, 0, NULL);
        const char *layer = NULL, *hash = NULL;
        if (json_unpack(st, "{s?s,s:s}", "layer", &layer, "hash", &hash) == 0 &&
            strlen(hash) == 16 &&
            ((!layer && !d->current) ||
             (layer && d->current && strcmp(layer, d->current->name) == 0))) {
                char *end;
                unsigned long long h = strtoull(hash, &end, 16);
                if (*end == '\0') {
                        d->hash = h;
                        d->have_hash = true;
                }
        }
        json_decref(st);
}

/* Adopt `current` from an earlier life; remove everything else. */
static void adopt(struct deps *d)
{
        char link[4096], target[256];
        ssize_t n = -1;
        if ((size_t)snprintf(link, sizeof(link), "%s/current", d->dir) < sizeof(link))
                n = readlink(link, target, sizeof(target) - 1);
        if (n > 0 && (target[n] = '\0', strncmp(target, "layer-", 6) == 0 && !strchr(target, '/')))
                d->current = layer_new(d, target);
        if (d->current) {
                _cleanup_free_ char *p = layer_path(d, d->current->name);
                d->installed = p ? scan_installed(p) : json_array();
        }
        adopt_hash(d);
        DIR *dd = opendir(d->dir);
        struct dirent *de;
        while (dd && (de = readdir(dd)))
                if (strncmp(de->d_name, "layer-", 6) == 0 &&
                    !(d->current && strcmp(de->d_name, d->current->name) == 0)) {
                        remove_tree(d, de->d_name);
                }
        if (dd)
                closedir(dd);
}

/* dependencies.wheel_dir must be readable by pip's account: found now,
 * not as "Permission denied" from an install (a root-only 0700 folder is a
 * common mistake). Checked in a child that takes that identity. */
static int check_wheel_dir(const struct deps *d, const struct config *c, char *err, size_t errlen)
{
        if (!*c->wheel_dir)
                return 0;
        pid_t pid = fork();
        if (pid < 0)
                return 0; /* no verdict: an install will tell */
        if (pid == 0) {
                DIR *dir = NULL;
                if (setgroups(0, NULL) < 0 || setresgid(d->gid, d->gid, d->gid) < 0 ||
                    setresuid(d->uid, d->uid, d->uid) < 0)
                        _exit(2);
                _exit((dir = opendir(c->wheel_dir)) && readdir(dir) ? 0 : 1);
        }
        int status = 0;
        if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 1)
                return 0;
        snprintf(err, errlen,
                 "dependencies.wheel_dir %s cannot be read by pip, which runs as uid %u "
                 "(jail.uid_max, an identity of its own, in no group): make it and every "
                 "directory above it readable and searchable by others (chmod o+rx)",
                 c->wheel_dir, (unsigned)d->uid);
        return -EACCES;
}

/* The layer directory made or adopted, status.json written. */
static int deps_setup(struct deps *d, char *err, size_t errlen)
{
        const struct config *c = d->cfg;
        d->uid = (uid_t)config_installer_uid(c);
        d->gid = (gid_t)config_installer_uid(c);
        if (!(d->dir = strdup(c->layer_dir)) ||
            asprintf(&d->status_path, "%s/status.json", d->dir) < 0)
                return -ENOMEM;
        if (check_wheel_dir(d, c, err, errlen) < 0)
                return -EACCES;
        /* mkdir -p, root's, readable by everyone (the HTTP process reads
         * status.json; runs get layers through binds) */
        for (char *p = d->dir + 1;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char keep = *p;
                *p = '\0';
                int r = mkdir(d->dir, 0755);
                *p = keep;
                if (r < 0 && errno != EEXIST) {
                        snprintf(err, errlen, "dependencies.layer_dir %s: %s", d->dir,
                                 strerror(errno));
                        return -errno;
                }
                if (!keep)
                        break;
        }
        /* root's, whoever made it: another owner could swap layers */
        if (chown(d->dir, 0, 0) < 0 || chmod(d->dir, 0755) < 0 ||
            (d->dirfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                snprintf(err, errlen, "dependencies.layer_dir %s: %s", d->dir, strerror(errno));
                return -errno;
        }
        adopt(d);
        if (!d->installed)
                d->installed = json_array();
        write_status(d);
        return 0;
}

int deps_new(const struct config *cfg, struct loop *loop, struct deps **ret, char *err,
             size_t errlen)
{
        struct deps *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (struct deps){.pidfd = -1, .out = -1, .dirfd = -1, .cfg = cfg, .loop = loop};
        int r = deps_setup(d, err, errlen);
        if (r < 0) {
                deps_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

void deps_on_layer_switched(struct deps *d, void (*fn)(void *data), void *data)
{
        d->layer_switched = fn;
        d->layer_switched_data = data;
}

struct deps *deps_free(struct deps *d)
{
        if (!d)
                return NULL;
        if (d->pid > 0) {
                /* the reaper kills and reaps pip (see pip_reaper); killed
                 * itself only if it has not ended a few seconds later */
                syscall(SYS_pidfd_send_signal, d->pidfd, SIGTERM, NULL, 0);
                if (poll(&(struct pollfd){d->pidfd, POLLIN, 0}, 1, 5000) <= 0)
                        syscall(SYS_pidfd_send_signal, d->pidfd, SIGKILL, NULL, 0);
                waitpid(d->pid, NULL, 0);
        }
        if (d->staging)
                remove_tree(d, strrchr(d->staging, '/') + 1);
        free(d->staging);
        safe_close(d->dirfd);
        strbuf_free(&d->log);
        safe_close(d->pidfd);
        safe_close(d->out);
        for (size_t i = 0; i < d->n_waiters; i++)
                close(d->waiters[i]);
        while (d->layers) {
                struct layer *l = d->layers;
                d->layers = l->next;
                free(l->name);
                free(l);
        }
        json_decref(d->installed);
        free(d->dir);
        free(d->status_path);
        free(d);
        return NULL;
}
