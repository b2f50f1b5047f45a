/* src/jailer/: the jailer's pieces, one direction loop.c <- run.c <-
 * warm.c <- jailer.c. The event loop (loop.c), the life of one run (run.c,
 * using the dependency layer of src/deps/), warm execution (warm.c: pools
 * of armed processes and the Python zygote) and the jailer that wires them
 * (jailer.c). Private to src/jailer/. */
#pragma once

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ipc/proto.h"
#include "jail/policy.h"
#include "jailer/loop.h"

struct config;
struct jailer;
struct cgroup_root;
struct cgroup_run;
struct runtime;
struct uidpool;
struct zygote;
struct deps;
struct layer;
struct shared_stats;
struct net;
struct zygote_fds;
struct run_limits;

struct pool;
struct run;
struct pending;

/* What a run tells the pool that asked for it (warm.c). A run without an
 * owner (a request's, or one retired) that becomes armed is retired. */
struct run_owner {
        void (*armed)(struct jailer *j, struct run *run);
        void (*gone)(struct jailer *j, struct run *run);
};

/* The zygote: a way of spawning a run other than a cold clone, set up by
 * warm.c when it starts one. */
struct run_spawner {
        bool (*up)(const struct jailer *j);
        /* ask for a warm child for run, with these fds and limits; 0 or -errno */
        int (*spawn)(struct jailer *j, struct run *run, const struct zygote_fds *f,
                     const struct run_limits *limits);
        /* a spawn went unanswered past the start-up deadline */
        void (*hung)(struct jailer *j);
};

struct lang_slot {
        struct runtime *rt;
        struct policy_prog filter[2]; /* [network] */
        struct pool *pool[2];         /* warm mode: armed processes by network mode */
        bool zygote;                  /* warm children come from the zygote */
};

enum run_state {
        RUN_SPAWNING, /* cloned (or asked of the zygote), walking the lock sequence */
        RUN_ARMED,    /* every lock on, waiting in its pool for a request */
        RUN_ACTIVE,   /* a request's: the program runs, the deadline ticks */
};

struct run {
        struct run *next;        /* all runs */
        struct run *pool_next;   /* armed runs of its pool, oldest first */
        struct run *zygote_next; /* runs waiting for the zygote's SPAWNED */
        struct watch w_chan, w_pidfd, w_timer, w_listener, w_sync, w_report;
        struct jailer *j;
        struct lang_slot *slot;
        const struct run_owner *owner; /* told when it is armed and gone, or NULL */
        struct pool *pool;             /* its owner's pool, or NULL */
        enum run_state state;
        bool network, warm, zygote, exec_done, killed, finished, counted;
        bool retired;  /* killed on purpose before serving: not a failure */
        bool answered; /* its result went out at its exit report, before the reap */
        int chan, timerfd, sync, listener, pidfd;
        pid_t pid;
        int code_w, out_r, err_r; /* our pipe ends, until STARTED hands them over */
        int report_r;             /* the program's exit report, or -1 */
        int reported;             /* its reported exit code, -1 before */
        struct layer *layer;      /* the dependency layer it binds (Python) */
        uid_t uid;
        struct cgroup_run *cg;
        uint32_t net_addr;    /* its address, with a network namespace */
        unsigned net_refused; /* packets the egress policy refused it (logged ones) */
        char trace[PROTO_TRACE_LEN + 1];
        char failure[160]; /* why the start failed, for the request's -500 */
        enum run_reason reason;
        int syscall_nr;
        int64_t start_us; /* monotonic_us() of the program: when STARTED was sent */
};

struct jailer {
        const struct config *cfg;
        struct lang_slot langs[PROTO_LANG_SLOTS]; /* by enum proto_language */
        struct uidpool *uids;
        struct cgroup_root *cg;
        /* the Python zygote serving SPAWNs; while it is replaced
         * (warm.zygote_max_runs/_max_age), the one starting to take over
         * and the one retiring */
        struct zygote *zygote, *zygote_next, *zygote_old;
        struct deps *deps;
        struct shared_stats *stats;        /* published for the HTTP process */
        int stats_fd;                      /* its sealed memfd, handed to the HTTP process */
        struct net *net;                   /* namespace mode with network: the runs' network */
        const struct run_spawner *spawner; /* the zygote, once warm.c started one */
        char *resolv_conf;                 /* the runs' /etc/resolv.conf with network, or NULL */
        char net_error[512];               /* why runs with network are refused, or "" */
        bool net_dirty;                    /* a run with network ended since counters were read */
        char **env[2];
        struct loop *loop;
        int sigfd, ctrl, http_pidfd, tickfd;
        int log_sock; /* to the HTTP process: the reopened log file */
        pid_t http_pid;
        struct watch w_ctrl, w_sig, w_http, w_tick, w_net;
        struct run *runs;
        unsigned n_active; /* runs that hold a request: <= max_workers */
        unsigned n_dying;  /* runs answered at their exit report, not yet reaped */
        struct pending *pending, *pending_tail; /* RUNs waiting for a dying run */
        struct seccomp_notif *notif;
        struct seccomp_notif_resp *resp;
        bool stopping, http_gone;
        bool ctrl_closed; /* the HTTP process sent what is off the menu */
        int exit_code;
        int64_t stop_deadline_ms; /* monotonic_ms() */
};

/* run.c */
/* Runs with network can be served (namespace mode set up, or host mode). */
bool run_network_usable(const struct jailer *j);
/* Take in the egress table's refusals, each told to its run's log. */
void run_read_refusals(struct jailer *j);
/* A new run of slot's language: for a request (chan >= 0), or for a pool
 * (owner and pool set). */
int run_create(struct jailer *j, struct lang_slot *slot, bool network,
               const struct run_owner *owner, struct pool *pool, int chan, const char *trace,
               char *err, size_t errlen);
/* Give an armed run to a request. */
void run_assign(struct jailer *j, struct run *run, int chan, const char *trace);
void run_kill(struct run *run, enum run_reason why);
/* Kill a run on purpose before it served anything: detached from its
 * owner, its exit is neither a pool failure nor worth an error line. */
void run_retire(struct run *run);
/* Watch the pidfd of a run whose process exists now. 0 or -errno. */
int run_watch_exit(struct jailer *j, struct run *run);
/* The run's process is gone (or never came): reap it and answer. */
void run_on_exit(struct jailer *j, struct run *run);
/* Send one RESULT that only carries a status (refusals). */
void run_refuse(int chan, enum run_status status, const char *message);

/* warm.c */
int warm_init(struct jailer *j, char *err, size_t errlen);
void warm_free(struct jailer *j);
/* An armed run of slot for this network mode, taken out of its pool. */
struct run *warm_take(struct jailer *j, struct lang_slot *slot, bool network);
/* Start spawns until every pool has its target (armed + spawning). */
void warm_refill(struct jailer *j);
/* Write pool sizes and the zygote's pid into the shared stats page. */
void warm_publish(struct jailer *j);
void warm_on_tick(struct jailer *j);
void warm_stop(struct jailer *j);
/* Kill the armed runs of a language (they hold a stale layer); refilled. */
void warm_drain(struct jailer *j, int lang);
bool warm_zygote_alive(const struct jailer *j);
bool warm_zygote_owns(const struct jailer *j, pid_t pid);
bool warm_spawns_pending(const struct jailer *j);
