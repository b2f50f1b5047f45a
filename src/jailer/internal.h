/* src/jailer/: the jailer's pieces, one direction loop.c <- run.c <-
 * zygote.c <- warm.c <- jailer.c. The event loop (loop.c), the life of one
 * run (run.c, using the dependency layer of src/deps/), the Python zygote's
 * client (zygote.c), the pools of armed runs (warm.c) and the jailer that
 * wires them (jailer.c). Each file's state is its own (struct runs and
 * struct run in run.c, struct zygotes in zygote.c, struct warm in warm.c,
 * struct jailer in jailer.c); this header is the contract between them:
 * what crosses files, and nothing else. Private to src/jailer/ (and
 * tests/unit/test_docs.c, which checks the figures the docs state). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/proto.h"
#include "jail/policy.h"
#include "base/loop.h"

struct config;
struct cgroup_root;
struct deps;
struct net;
struct run_limits;
struct runtime;
struct shared_stats;
struct uidpool;
struct zygote_fds;

struct run;
struct runs;
struct zygotes;
struct warm;

/* ---- what every run is made with (set up by jailer.c) ------------------- */

/* A language: its runtime (NULL: not on this host) and its compiled
 * syscall filters. */
struct lang_slot {
        struct runtime *rt;
        struct policy_prog filter[2]; /* [network] */
};

/* Built by jailer.c at start and read by run.c, zygote.c and warm.c; it
 * lives as long as the jailer. */
struct run_env {
        const struct config *cfg;
        struct loop *loop;
        struct lang_slot langs[PROTO_LANG_SLOTS]; /* by enum proto_language */
        struct uidpool *uids;
        struct cgroup_root *cg;
        struct deps *deps;
        struct net *net;            /* namespace mode with network: the runs' network */
        struct emptyns *emptyns;    /* namespaces for runs without network, or NULL */
        char *resolv_conf;          /* the runs' /etc/resolv.conf with network, or NULL */
        char net_error[512];        /* why runs with network are refused, or "" */
        char **envp[2];             /* a run's environment, [network] */
        struct shared_stats *stats; /* published for the HTTP process */
};

/* Runs with network can be served (namespace mode set up, or host mode). */
static inline bool run_env_network_usable(const struct run_env *env)
{
        return !env->net_error[0];
}

/* Figures docs/ARCHITECTURE.md states (tests/unit/test_docs.c keeps it
 * true): a run's start-up deadline (run.c); the backoff after repeated
 * failures of a pool's spawns or the zygote's starts, doubling from the
 * first to the last (warm.c, zygote.c); how long after a replacement
 * zygote failed the next is tried (zygote.c). */
#define RUN_SPAWN_TIMEOUT_S 10
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 30000
#define ZYGOTE_ROTATE_RETRY_S 10

static inline unsigned backoff_ms(unsigned failures)
{
        unsigned ms = BACKOFF_FIRST_MS;
        for (unsigned i = 1; i < failures && ms < BACKOFF_MAX_MS; i++)
                ms *= 2;
        return ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
}

/* ---- run.c: the runs ---------------------------------------------------- */

/* What a run tells the pool that asked for it (warm.c), with the pool as
 * data. A run without an owner (a request's, or one retired) that becomes
 * armed is retired. */
struct run_owner {
        void (*armed)(void *data, struct run *run);
        /* gone before serving: after it was armed, or still starting */
        void (*gone)(void *data, struct run *run, bool was_armed);
};

/* Another way of spawning a language's runs than a cold clone: the
 * zygote (zygote.c registers itself with runs_set_spawner). */
struct run_spawner {
        bool (*up)(void *data);
        /* ask for a warm child for run, with these fds and limits; 0 or
         * -errno. Its answer comes through run_spawned(). */
        int (*spawn)(void *data, struct run *run, uid_t uid, bool network,
                     const struct zygote_fds *f, const struct run_limits *limits);
        /* a spawn went unanswered past the start-up deadline */
        void (*hung)(void *data);
};

/* Every run, and what they share (the seccomp listener's buffers).
 * err gets one clear line. */
int runs_new(const struct run_env *env, struct runs **ret, char *err, size_t errlen);
struct runs *runs_free(struct runs *rs);
void runs_set_spawner(struct runs *rs, int lang, const struct run_spawner *sp, void *data);
/* A new run of lang: for a request (chan >= 0, consumed on success), or
 * for a pool (owner and owner_data set). 0, -EAGAIN (no UID free) or
 * -errno with err set. */
int run_create(struct runs *rs, int lang, bool network, const struct run_owner *owner,
               void *owner_data, int chan, const char *trace, char *err, size_t errlen);
/* Give an armed run to a request. */
void run_assign(struct run *run, int chan, const char *trace);
void run_kill(struct run *run, enum run_reason why);
/* Kill a run on purpose before it served anything: detached from its
 * owner, its exit is neither a pool failure nor worth an error line. */
void run_retire(struct run *run);
/* Send one RESULT that only carries a status (refusals). */
void run_refuse(int chan, enum run_status status, const char *message);

/* For zygote.c: the child asked for is born (pid > 0), or could not be
 * (error, an errno). */
void run_spawned(struct run *run, pid_t pid, int error);
/* Its zygote died before answering: the run ends; a request's starts
 * again cold on the same channel (or is refused), so none fails. */
void run_spawn_lost(struct run *run);

/* For warm.c: gone, or going (a SIGKILL pending, sent from outside say,
 * or exiting). */
bool run_exited(const struct run *run);
/* It binds the current dependency layer (or needs none). */
bool run_layer_is_current(const struct run *run);

/* For jailer.c. */
unsigned runs_active(const struct runs *rs);        /* runs holding a request: <= max_workers */
int64_t runs_last_answer_ms(const struct runs *rs); /* monotonic; 0: none yet */
unsigned runs_dying(const struct runs *rs);         /* answered at their exit report, not reaped */
bool runs_empty(const struct runs *rs);
bool runs_own(const struct runs *rs, pid_t pid);
void runs_kill_all(struct runs *rs);
/* The jailer stops: runs holding no request are killed, and a start that
 * fails from now on is no failure. */
void runs_stop(struct runs *rs);
/* No UID free, but a run answered at its exit report may still hold one
 * for the moment its process needs to die: wait for the first such run
 * and reap it. True if a UID came back. */
bool runs_reap_answered(struct runs *rs);
/* Free the runs that finished in the last batch of events. */
void runs_sweep(struct runs *rs);
/* Take in the egress table's refusals, each told to its run's log. */
void runs_read_refusals(struct runs *rs);
/* The refusal counters into the statistics page, after runs with network. */
void runs_publish_refused(struct runs *rs);

/* ---- zygote.c: the Python zygote's client ------------------------------- */

/* Warm mode: find lockbox-pyzygote and start it (a failed start is retried
 * on the tick; a missing binary leaves Python runs cold), registered with
 * rs as the way of spawning Python runs. on_ready(data) is called each time
 * a zygote is ready to serve. */
int zygotes_new(const struct run_env *env, struct runs *rs, void (*on_ready)(void *data),
                void *data, struct zygotes **ret);
struct zygotes *zygotes_free(struct zygotes *zs);
/* Python's warm runs come from the zygote (not disabled); it is ready now. */
bool zygotes_serving(const struct zygotes *zs);
bool zygotes_up(const struct zygotes *zs);
/* Restart a dead one after its backoff, replace an old one. */
void zygotes_on_tick(struct zygotes *zs);
/* Free the zygotes retired during the loop's last batch of events. */
void zygotes_sweep(struct zygotes *zs);
/* Only the supervisor stops the zygotes (at shutdown). */
void zygotes_stop(struct zygotes *zs);
pid_t zygotes_pid(const struct zygotes *zs); /* the serving one's, or 0 */
bool zygotes_alive(const struct zygotes *zs);
bool zygotes_own(const struct zygotes *zs, pid_t pid);
bool zygotes_pending(const struct zygotes *zs); /* a SPAWNED is awaited */

/* ---- warm.c: warm execution --------------------------------------------- */

/* The pools of the configured languages and, for Python, the zygote; in
 * cold mode nothing but the statistics warm_publish() writes. */
int warm_new(const struct run_env *env, struct runs *rs, struct warm **ret, char *err,
             size_t errlen);
struct warm *warm_free(struct warm *w);
/* An armed run of lang for this network mode, taken out of its pool. */
struct run *warm_take(struct warm *w, int lang, bool network);
/* Start spawns until every pool has its target (armed + spawning). */
void warm_refill(struct warm *w);
/* How long a refill is held back after the last answer (ms), or -1:
 * the loop wakes by then. */
int warm_refill_wait_ms(const struct warm *w);
/* Write pool sizes and the zygote's pid into the shared stats page. */
void warm_publish(struct warm *w);
/* After each batch of events: free what its handlers let go. */
void warm_sweep(struct warm *w);
void warm_on_tick(struct warm *w);
void warm_stop(struct warm *w);
/* Kill the armed runs of a language (they hold a stale layer); refilled. */
void warm_drain(struct warm *w, int lang);
bool warm_zygote_alive(const struct warm *w);
bool warm_zygote_owns(const struct warm *w, pid_t pid);
bool warm_spawns_pending(const struct warm *w);
