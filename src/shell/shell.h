/* Shell jobs (Dify's shellctl API), the jailer's side: the jobs table.
 * The jailer hands each PROTO_SHELL call's channel to shell_call(); the
 * rest happens on the jailer's loop: reading the call, starting jobs
 * (a keeper process each), waiting for output or an exit, answering. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct config;
struct loop;
struct cgroup_root;
struct net;
struct shell;

/* How bindings reach the network: not at all (loopback only), through a
 * namespace of the run network each (net.h, with its egress policy), or
 * the host's own (network.mode: host, unsafe). */
enum shell_net { SHELL_NET_NONE, SHELL_NET_NAMESPACE, SHELL_NET_HOST };

struct shell_deps {
        const struct config *cfg;
        struct loop *loop;
        struct cgroup_root *cg;
        enum shell_net net_mode;
        struct net *net;         /* SHELL_NET_NAMESPACE: the run network */
        const char *resolv_conf; /* its /etc/resolv.conf, or NULL: the host's */
};

/* At start-up, as root: the state directory (emptied: jobs do not outlive
 * the daemon yet), shell.home, the jobs' filters. 0 or -errno with err. */
int shell_new(const struct shell_deps *d, struct shell **ret, char *err, size_t errlen);
struct shell *shell_free(struct shell *sh);
/* A call's channel (the PROTO_SHELL message's fd); the shell owns it. */
void shell_call(struct shell *sh, int chan);
/* The keepers and binding inits are the jailer's children. */
bool shell_owns(const struct shell *sh, pid_t pid);
/* Milliseconds until shell_tick has work, or -1. */
int shell_wait_ms(const struct shell *sh);
/* Timers: parked waits, grace periods, job time limits, retention. */
void shell_tick(struct shell *sh);
/* Stop: calls answered 503; with shell.keep_jobs the jobs and bindings
 * are let go alive (the next start adopts them), else every job killed and
 * every binding ended. */
void shell_stop(struct shell *sh);
/* Before the run network is built at start: bindings a killed lockboxd
 * left lose the links of its network (shell jobs' records read). */
void shell_unplug_kept(const struct config *cfg);
/* Processes shell_stop let go alive (keepers, bindings' inits): the
 * jailer must leave them at its exit, for the next start to adopt. */
bool shell_keeps(const struct shell *sh, pid_t pid);
/* Jobs and bindings alive (the jailer waits for none at exit). */
unsigned shell_jobs(const struct shell *sh);
