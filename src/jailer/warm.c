/* Warm execution (see docs/ARCHITECTURE.md "Warm execution"): per language
 * a pool of armed runs, processes that have walked the whole lock sequence
 * and wait for their code, refilled in the background; for Python they are
 * forked by the zygote (zygote.c), an interpreter that imported
 * warm.python_preload once and never runs a program. A request with no
 * armed run waiting starts one on demand (a zygote fork, else a cold
 * start). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/stats.h"
#include "jail/uidpool.h"
#include "jailer/internal.h"
#include "runtime/runtime.h"

struct pool {
        struct warm *w;
        int lang;
        bool network;
        bool active; /* the configured mode from the start; the other once asked for */
        unsigned target, spawning;
        struct run **armed; /* target slots: the armed runs, oldest first */
        unsigned n_armed;
        unsigned failures;
        int64_t retry_at_ms; /* monotonic_ms() */
};

struct warm {
        const struct run_env *env;
        struct runs *rs;
        struct pool *pool[PROTO_LANG_SLOTS][2]; /* by language and network mode */
        struct zygotes *zygotes;                /* warm mode: Python's, or NULL */
        bool stopping;
};

/* ---- pools ------------------------------------------------------------------ */

/* One pool per network mode: the configured one fills at start; the other
 * (requests without network while the configuration allows it) only once
 * such a request has come, so a Dify deployment keeps one set. */
static int pool_add(struct warm *w, int lang, int target)
{
        if (!w->env->langs[lang].rt || target <= 0)
                return 0;
        for (int net = 0; net <= 1; net++) {
                if (net && !run_env_network_usable(w->env))
                        continue; /* refused, with the reason, until fixed */
                struct pool *p = calloc(1, sizeof(*p));
                struct run **armed = calloc((size_t)target, sizeof(*armed));
                if (!p || !armed) {
                        free(p);
                        free(armed);
                        return -ENOMEM;
                }
                *p = (struct pool){.w = w,
                                   .lang = lang,
                                   .network = net,
                                   .active = net == (int)w->env->cfg->enable_network,
                                   .target = (unsigned)target,
                                   .armed = armed};
                w->pool[lang][net] = p;
        }
        return 0;
}

static struct pool *pool_free(struct pool *p)
{
        if (p) {
                free(p->armed);
                free(p);
        }
        return NULL;
}

/* Take the i-th armed run out of the pool. */
static struct run *pool_remove(struct pool *p, unsigned i)
{
        struct run *run = p->armed[i];
        memmove(&p->armed[i], &p->armed[i + 1], (p->n_armed - i - 1) * sizeof(p->armed[0]));
        p->n_armed--;
        return run;
}

struct run *warm_take(struct warm *w, int lang, bool network)
{
        struct pool *p = w->pool[lang][network];
        if (!p)
                return NULL;
        p->active = true;
        /* Skip armed runs that died since (killed from outside): their
         * pidfd event, still queued, cleans them up. */
        for (unsigned i = 0; i < p->n_armed; i++)
                if (!run_exited(p->armed[i]))
                        return pool_remove(p, i);
        return NULL;
}

static void pool_on_armed(void *data, struct run *run)
{
        struct pool *p = data;
        p->spawning--;
        /* a dependency layer replaced while it started: not worth keeping
         * (nor is a run beyond the target, which cannot happen: armed +
         * spawning never exceeds it) */
        if (!run_layer_is_current(run) || p->n_armed >= p->target) {
                run_retire(run);
                return;
        }
        p->failures = 0;
        p->armed[p->n_armed++] = run;
}

void warm_drain(struct warm *w, int lang)
{
        if (!w)
                return;
        for (int net = 0; net <= 1; net++) {
                struct pool *p = w->pool[lang][net];
                while (p && p->n_armed > 0)
                        run_retire(pool_remove(p, 0));
        }
}

static void pool_on_gone(void *data, struct run *run, bool was_armed)
{
        struct pool *p = data;
        if (!was_armed) {
                p->spawning--;
                p->failures++;
                p->retry_at_ms = monotonic_ms() + backoff_ms(p->failures);
                return;
        }
        for (unsigned i = 0; i < p->n_armed; i++)
                if (p->armed[i] == run) {
                        pool_remove(p, i);
                        return;
                }
}

/* What a pool's runs tell it. */
static const struct run_owner pool_owner = {.armed = pool_on_armed, .gone = pool_on_gone};

/* Whether the UID range leaves any UID for armed runs at all. */
static bool can_arm(const struct warm *w)
{
        return config_run_uids(w->env->cfg) > w->env->cfg->max_workers;
}

_Static_assert(STATS_LANGS == PROTO_LANG_SLOTS, "the statistics page has a slot per language");

void warm_publish(struct warm *w)
{
        struct shared_stats *s = w->env->stats;
        bool all = true;
        for (size_t l = 0; l < STATS_LANGS; l++) {
                struct pool *const *pool = w->pool[l];
                atomic_store(&s->pool_target[l], pool[0] ? pool[0]->target : 0);
                for (int net = 0; net <= 1; net++) {
                        const struct pool *p = pool[net];
                        atomic_store(&s->armed[l][net], p ? p->n_armed : 0);
                        atomic_store(&s->spawning[l][net], p ? p->spawning : 0);
                        if (p && p->active && net == (int)w->env->cfg->enable_network &&
                            p->n_armed == 0)
                                all = false;
                }
        }
        /* warm once every pool of the configured mode has served up an armed
         * run (sticky: a pool drained by load is not a reason to stop
         * sending traffic) */
        if (all || !can_arm(w))
                atomic_store(&s->warmed, 1);
        atomic_store(&s->active, runs_active(w->rs));
        atomic_store(&s->zygote_pid, zygotes_pid(w->zygotes));
}

/* Armed runs never take the UIDs that requests could still need. */
static bool uid_to_spare(const struct warm *w)
{
        unsigned size = (unsigned)config_run_uids(w->env->cfg);
        unsigned reserved = (unsigned)w->env->cfg->max_workers - runs_active(w->rs);
        return uidpool_in_use(w->env->uids) + reserved < size;
}

/* A refill competes with running programs for the two things a run's
 * answer waits on: the jailer's loop (making a run's network namespace
 * and link holds it for ~1.3 ms) and the CPUs (the zygote's fork and the
 * new process's lock sequence, ~1 ms of CPU). While programs run and an
 * armed run is still left, it waits for them; and for REFILL_QUIET_MS
 * after a result went out, while the pool is at least half full, so that
 * the HTTP side sends that answer before the refill takes the CPU (a
 * trivial run spaced like a workflow's nodes answered in ~1.7-2.0 ms instead
 * of ~2.2-2.3 ms at p50 with runs 20 ms apart, 2-core machine). */
#define REFILL_QUIET_MS 2

static bool refill_now(const struct warm *w, const struct pool *p)
{
        if (2 * p->n_armed >= p->target &&
            monotonic_ms() - runs_last_answer_ms(w->rs) < REFILL_QUIET_MS)
                return false;
        return !(runs_active(w->rs) > 0 && p->n_armed > 0);
}

int warm_refill_wait_ms(const struct warm *w)
{
        int64_t left = runs_last_answer_ms(w->rs) + REFILL_QUIET_MS - monotonic_ms();
        return left > 0 ? (int)left : -1;
}

static void pool_refill(struct warm *w, struct pool *p)
{
        while (p->active && p->n_armed + p->spawning < p->target &&
               monotonic_ms() >= p->retry_at_ms && uid_to_spare(w) && refill_now(w, p)) {
                if (p->lang == LANG_PYTHON3 && zygotes_serving(w->zygotes) &&
                    !zygotes_up(w->zygotes))
                        return; /* armed Python comes from the zygote only */
                char err[200] = "";
                int r = run_create(w->rs, p->lang, p->network, &pool_owner, p, -1, NULL, err,
                                   sizeof(err));
                if (r == -EAGAIN)
                        return; /* every UID is busy: requests first */
                if (r < 0) {
                        p->failures++;
                        p->retry_at_ms = monotonic_ms() + backoff_ms(p->failures);
                        log_error(NULL, "warm.refill_failed", "lang=%s error=%s",
                                  w->env->langs[p->lang].rt->name, log_q(err));
                        return;
                }
                p->spawning++;
        }
}

void warm_sweep(struct warm *w)
{
        if (w)
                zygotes_sweep(w->zygotes);
}

void warm_refill(struct warm *w)
{
        if (w->stopping)
                return;
        for (size_t i = 0; i < PROTO_LANG_SLOTS; i++)
                for (int net = 0; net <= 1; net++)
                        if (w->pool[i][net])
                                pool_refill(w, w->pool[i][net]);
}

void warm_on_tick(struct warm *w)
{
        if (w->zygotes)
                zygotes_on_tick(w->zygotes);
        warm_refill(w);
}

void warm_stop(struct warm *w)
{
        if (!w)
                return;
        w->stopping = true;
        zygotes_stop(w->zygotes);
}

bool warm_zygote_alive(const struct warm *w)
{
        return zygotes_alive(w->zygotes);
}

bool warm_zygote_owns(const struct warm *w, pid_t pid)
{
        return zygotes_own(w->zygotes, pid);
}

bool warm_spawns_pending(const struct warm *w)
{
        return zygotes_pending(w->zygotes);
}

/* A zygote is ready: the Python pools can fill. */
static void on_zygote_ready(void *data)
{
        warm_refill(data);
}

int warm_new(const struct run_env *env, struct runs *rs, struct warm **ret, char *err,
             size_t errlen)
{
        const struct config *c = env->cfg;
        struct warm *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct warm){.env = env, .rs = rs};
        *ret = w;
        if (!config_warm(c))
                return 0;
        int r = pool_add(w, LANG_PYTHON3, c->python_pool);
        if (r == 0)
                r = pool_add(w, LANG_NODEJS, c->nodejs_pool);
        if (r < 0) {
                snprintf(err, errlen, "warm pools: %s", strerror(-r));
                return r;
        }
        return zygotes_new(env, rs, on_zygote_ready, w, &w->zygotes);
}

struct warm *warm_free(struct warm *w)
{
        if (!w)
                return NULL;
        for (size_t i = 0; i < PROTO_LANG_SLOTS; i++)
                for (int net = 0; net <= 1; net++)
                        w->pool[i][net] = pool_free(w->pool[i][net]);
        zygotes_free(w->zygotes);
        free(w);
        return NULL;
}
