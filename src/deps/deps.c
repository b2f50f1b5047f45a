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
 * /ready. This file decides when to install and follows an install to its
 * end; pip.c launches pip, layers.c keeps the layers on disk and the runs
 * bound to them, status.c writes status.json. */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "config/config.h"
#include "deps/deps.h"
#include "deps/layers.h"
#include "deps/pip.h"
#include "deps/status.h"
#include "ipc/channel.h"
#include "ipc/proto.h"

#define REQUIREMENTS_MAX (1 << 20)
#define PIP_LOG_MAX (64 * 1024)
#define MAX_WAITERS 32

struct deps {
        char *status_path;
        struct deps_layers *layers; /* dependencies.layer_dir and what is in it */
        uid_t uid;                  /* the installer's */
        gid_t gid;
        uint64_t hash;  /* of what `current` was built from */
        bool have_hash; /* false until an install or status.json tells it */
        bool attempted, ok;
        char message[1024];
        time_t last_time;
        json_t *installed;
        /* the install in progress (pip.pid 0: none) */
        struct deps_pip pip;
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

/* ---- status.json, read by the HTTP process -------------------------------------- */

static void write_status(struct deps *d)
{
        struct deps_status st = {.attempted = d->attempted,
                                 .installing = d->pip.pid > 0,
                                 .ok = d->ok,
                                 .time = d->last_time,
                                 .message = d->message,
                                 .installed = d->installed,
                                 .layer = deps_layers_current(d->layers),
                                 .have_hash = d->have_hash,
                                 .hash = d->hash};
        if (deps_status_write(d->status_path, &st) < 0)
                log_error(NULL, "deps.status_failed", "path=%s", log_q(d->status_path));
}

/* ---- layers and runs ------------------------------------------------------------- */

int deps_layer_acquire(struct deps *d, struct layer **ret_layer, int *ret_fd)
{
        if (!d) {
                *ret_layer = NULL;
                *ret_fd = -1;
                return 0;
        }
        return deps_layers_acquire(d->layers, ret_layer, ret_fd);
}

bool deps_layer_is_current(const struct deps *d, const struct layer *l)
{
        return !d || deps_layers_is_current(d->layers, l);
}

void deps_layer_release(struct deps *d, struct layer *l)
{
        if (d)
                deps_layers_release(d->layers, l);
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
                log_info(
                    NULL, "deps.installed", "layer=%s packages=%zu",
                    log_q(deps_layers_current(d->layers) ? deps_layers_current(d->layers) : "none"),
                    json_array_size(d->installed));
        else
                log_error(NULL, "deps.install_failed", "error=%s", log_q(message));
        write_status(d);
        answer_waiters(d);
}

/* Make the finished staging directory name (NULL: no layer) current. */
static int switch_to(struct deps *d, const char *name, uint64_t hash)
{
        int r = deps_layers_switch(d->layers, name);
        if (r < 0)
                return r;
        d->hash = hash;
        d->have_hash = true;
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
                        deps_layers_remove(d->layers, name);
                install_done(d, false, msg);
                return;
        }
        json_t *inst = NULL;
        int r = deps_layers_seal(d->layers, name);
        if (r < 0)
                log_error(NULL, "deps.seal_failed", "layer=%s error=%s", log_q(name),
                          log_q(strerror(-r)));
        if (r < 0 || !(inst = deps_layers_installed(d->layers, name)) ||
            switch_to(d, name, d->job_hash) < 0) {
                json_decref(inst);
                deps_layers_remove(d->layers, name);
                install_done(d, false, "could not seal or switch to the new layer");
                return;
        }
        json_decref(d->installed);
        d->installed = inst;
        install_done(d, true, "");
}

static void on_output_event(void *data, uint32_t events);
static void on_exit_event(void *data, uint32_t events);

static int start_pip(struct deps *d, const struct strbuf *reqs)
{
        int r = deps_layers_stage(d->layers, reqs->data ? reqs->data : "", reqs->len, &d->staging);
        if (r < 0 || (r = deps_pip_start(d->cfg, d->uid, d->gid, d->staging, &d->pip)) < 0)
                return r;
        strbuf_init(&d->log, PIP_LOG_MAX);
        d->job_started_ms = monotonic_ms();
        d->timed_out = false;
        d->w_out = (struct watch){.fn = on_output_event, .data = d};
        d->w_exit = (struct watch){.fn = on_exit_event, .data = d};
        if ((r = loop_watch(d->loop, d->pip.out, &d->w_out)) < 0 ||
            (r = loop_watch(d->loop, d->pip.pidfd, &d->w_exit)) < 0)
                kill(d->pip.pid, SIGKILL);
        log_info(NULL, "deps.installing", "pid=%d", (int)d->pip.pid);
        return r;
}

/* Check the requirements and install if asked (force) or needed. */
static void check_and_install(struct deps *d, bool force)
{
        if (d->pip.pid > 0) {
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
                        deps_layers_remove(d->layers, strrchr(d->staging, '/') + 1);
                free(TAKE_PTR(d->staging));
                install_done(d, false, msg);
        }
        write_status(d);
}

static void deps_on_output(struct deps *d)
{
        char buf[4096];
        ssize_t n;
        while ((n = read(d->pip.out, buf, sizeof(buf))) > 0) {
                /* keep the tail: pip's error is at the end */
                if (strbuf_append(&d->log, buf, (size_t)n) < 0) {
                        size_t keep = d->log.len / 2;
                        memmove(d->log.data, d->log.data + d->log.len - keep, keep);
                        d->log.len = keep;
                        strbuf_append(&d->log, buf, (size_t)n);
                }
        }
        if (n == 0) {
                loop_unwatch(d->loop, d->pip.out);
                d->pip.out = safe_close(d->pip.out);
        }
}

static void deps_on_exit(struct deps *d)
{
        int status = 0;
        if (RETRY_EINTR(waitpid(d->pip.pid, &status, WNOHANG)) <= 0)
                return;
        if (d->pip.out >= 0)
                deps_on_output(d);
        loop_unwatch(d->loop, d->pip.pidfd);
        d->pip.pidfd = safe_close(d->pip.pidfd);
        d->pip.out = safe_close(d->pip.out);
        d->pip.pid = 0;
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
        return d && d->pip.pid > 0 && d->pip.pid == pid;
}

void deps_on_tick(struct deps *d)
{
        if (!d)
                return;
        if (d->pip.pid > 0) {
                if (monotonic_ms() - d->job_started_ms >= d->cfg->install_timeout * 1000LL &&
                    !d->timed_out) {
                        d->timed_out = true;
                        deps_pip_term(&d->pip);
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
        if (d->pip.pid > 0)
                d->force_again = true; /* after the one running, one with today's file */
        else
                check_and_install(d, true);
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
        if (asprintf(&d->status_path, "%s/status.json", c->layer_dir) < 0) {
                d->status_path = NULL;
                return -ENOMEM;
        }
        if (check_wheel_dir(d, c, err, errlen) < 0)
                return -EACCES;
        int r = deps_layers_open(c->layer_dir, d->uid, d->gid, &d->layers, err, errlen);
        if (r < 0)
                return r;
        const char *current = deps_layers_current(d->layers);
        if (current)
                d->installed = deps_layers_installed(d->layers, current);
        if (!d->installed)
                d->installed = json_array();
        d->have_hash = deps_status_hash(d->status_path, current, &d->hash);
        write_status(d);
        return 0;
}

int deps_new(const struct config *cfg, struct loop *loop, struct deps **ret, char *err,
             size_t errlen)
{
        struct deps *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (struct deps){.pip = {.pidfd = -1, .out = -1}, .cfg = cfg, .loop = loop};
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
        deps_pip_stop(&d->pip, 5000);
        if (d->staging)
                deps_layers_remove(d->layers, strrchr(d->staging, '/') + 1);
        free(d->staging);
        strbuf_free(&d->log);
        safe_close(d->pip.pidfd);
        safe_close(d->pip.out);
        for (size_t i = 0; i < d->n_waiters; i++)
                close(d->waiters[i]);
        deps_layers_free(d->layers);
        json_decref(d->installed);
        free(d->status_path);
        free(d);
        return NULL;
}
