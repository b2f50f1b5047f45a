/* lockboxd configuration: one struct, filled from built-in defaults, then
 * the YAML file, then the reference's environment variables. The schema
 * table in config.c drives parsing, validation, --check-config, the dumped
 * defaults and docs/CONFIG.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct config {
        /* app (reference keys) */
        int port;                            /* app.port, SANDBOX_PORT */
        bool debug;                          /* app.debug, DEBUG */
        char *key;                           /* app.key, API_KEY */
        int max_workers;                     /* MAX_WORKERS: runs executing at once; more wait */
        int max_requests;                    /* MAX_REQUESTS: runs in flight (running + waiting) */
        int worker_timeout;                  /* seconds, WORKER_TIMEOUT */
        char *python_path;                   /* PYTHON_PATH */
        char *python_pip_mirror_url;         /* PIP_MIRROR_URL */
        int64_t python_deps_update_interval; /* seconds, 0 = never; PYTHON_DEPS_UPDATE_INTERVAL */
        char *nodejs_path;                   /* NODEJS_PATH */
        bool enable_network;                 /* ENABLE_NETWORK */
        bool enable_preload;                 /* ENABLE_PRELOAD */
        int *allowed_syscalls;               /* resolved numbers, ALLOWED_SYSCALLS */
        size_t n_allowed_syscalls;
        char *log_path;     /* directory for lockboxd.log, "" = stderr only */
        char *proxy_socks5; /* SOCKS5_PROXY */
        char *proxy_http;   /* HTTP_PROXY */
        char *proxy_https;  /* HTTPS_PROXY */

        /* compat: opt into dify-sandbox behaviour lockbox changed on purpose */
        bool stderr_is_error; /* compat.stderr_is_error: "error" = stderr on exit 0 */

        /* server: the HTTP side */
        char *listen;               /* server.listen: IPv4/IPv6 address to bind */
        int64_t max_body_bytes;     /* server.max_body_bytes */
        char *user;                 /* server.user: unprivileged account for the HTTP process */
        int connection_timeout;     /* server.connection_timeout, seconds idle */
        int header_timeout;         /* server.header_timeout, seconds */
        int body_timeout;           /* server.body_timeout, seconds */
        int max_connections;        /* server.max_connections */
        int max_connections_per_ip; /* server.max_connections_per_ip */
        char *log_format;           /* server.log_format: "logfmt" or "json" */
        bool metrics;               /* server.metrics: serve GET /metrics */
        char *metrics_listen;       /* server.metrics_listen: "ADDR:PORT", "" = the API's */

        /* limits: per run */
        int64_t memory_bytes; /* limits.memory */
        int processes;        /* limits.processes (tasks incl. threads) */
        int64_t output_bytes; /* limits.output: stdout+stderr together */
        int64_t tmp_bytes;    /* limits.tmp_size */
        int tmp_inodes;       /* limits.tmp_inodes */
        int cpu_seconds;      /* limits.cpu_time */
        int open_files;       /* limits.open_files */
        int64_t file_bytes;   /* limits.file_size */

        /* jail */
        int uid_min;           /* jail.uid_min */
        int uid_max;           /* jail.uid_max */
        char **extra_ro_paths; /* jail.extra_ro_paths: absolute, bound read-only */
        size_t n_extra_ro_paths;
        char *hostname; /* jail.hostname */

        /* network: how runs with network reach it */
        char *net_mode;   /* network.mode: "namespace" (default) or "host" */
        char *net_subnet; /* network.subnet: IPv4 CIDR of run addresses */
        char **net_allow; /* network.allow: CIDR, CIDR:port, ADDRESS:port */
        size_t n_net_allow;
        char **net_egress_only; /* network.egress_only: when set, the only destinations */
        size_t n_net_egress_only;
        char **net_dns_servers; /* network.dns_servers: upstream resolvers, [] = resolv.conf */
        size_t n_net_dns_servers;
        int net_max_connections;            /* network.max_connections: per run, 0 = none */
        int net_new_connections_per_second; /* network.new_connections_per_second, 0 = none */

        /* warm execution */
        char *warm_mode;        /* warm.mode: "warm" (default) or "cold" */
        int python_pool;        /* warm.python_pool: armed Python processes */
        int nodejs_pool;        /* warm.nodejs_pool: armed Node.js processes */
        int zygote_max_runs;    /* warm.zygote_max_runs: 0 = no limit */
        int64_t zygote_max_age; /* warm.zygote_max_age, seconds: 0 = no limit */
        char **python_preload;  /* warm.python_preload: modules the zygote imports */
        size_t n_python_preload;

        /* shell: Dify's shell-job API */
        bool shell_enabled;                 /* shell.enabled */
        int shell_port;                     /* shell.port */
        char *shell_listen;                 /* shell.listen */
        char *shell_token;                  /* shell.token, SHELLCTL_AUTH_TOKEN; "" = no auth */
        char *shell_state_dir;              /* shell.state_dir */
        char *shell_home;                   /* shell.home: default HOME, root of every binding */
        int shell_uid;                      /* shell.uid: jobs' UID and GID */
        int64_t shell_disk_bytes;           /* shell.disk_size: 0 = no file system of its own */
        int64_t shell_binding_disk_bytes;   /* shell.binding_disk: a HOME's bound, 0 = none */
        int64_t shell_workspace_disk_bytes; /* shell.workspace_disk: a workspace's, 0 = none */
        int64_t shell_max_output;           /* shell.max_output: bytes of one job's output.log */
        int shell_max_jobs;                 /* shell.max_jobs: live jobs */
        int shell_cpu_weight;               /* shell.cpu_weight: per binding */
        bool shell_keep_jobs;               /* shell.keep_jobs: jobs outlive a stop */
        int64_t shell_retention;            /* shell.retention, seconds */
        int64_t shell_binding_linger;       /* shell.binding_linger, seconds */
        int64_t shell_job_timeout;          /* shell.job_timeout, seconds */
        int64_t shell_memory_bytes;         /* shell.memory: per job */
        int shell_processes;                /* shell.processes: per job */
        int64_t shell_binding_memory_bytes; /* shell.binding_memory: a binding's jobs */
        int shell_binding_processes;        /* shell.binding_processes */
        int64_t shell_snapshot_timeout;     /* shell.snapshot_timeout, seconds */
        int64_t shell_snapshot_max_bytes;   /* shell.snapshot_max_bytes */
        int shell_snapshot_max_entries;     /* shell.snapshot_max_entries */
        char *shell_path_isolation; /* SHELLCTL_ENABLE_PATH_ISOLATION: "true" = Landlock on */
        char **shell_landlock_rw;   /* SHELLCTL_LANDLOCK_RW_PATHS */
        size_t n_shell_landlock_rw;
        char **shell_landlock_ro; /* SHELLCTL_LANDLOCK_RO_PATHS */
        size_t n_shell_landlock_ro;
        char **shell_landlock_rw_dev; /* SHELLCTL_LANDLOCK_RW_DEV_PATHS */
        size_t n_shell_landlock_rw_dev;

        /* dependencies */
        char *python_requirements; /* dependencies.python_requirements */
        char *layer_dir;           /* dependencies.layer_dir: where layers are built */
        char *wheel_dir;           /* dependencies.wheel_dir: offline wheels, "" = use an index */
        bool source_builds;        /* dependencies.allow_source_builds */
        int64_t install_timeout;   /* dependencies.install_timeout, seconds */
};

/* Reads an environment variable; tests pass their own. */
typedef const char *(*config_getenv_fn)(const char *name);

/* The process environment, for config_load()'s getenv_fn (NULL there means
 * no environment at all). */
const char *config_getenv_process(const char *name);

/* System calls allowed_syscalls / ALLOWED_SYSCALLS can never add, by name,
 * NULL-terminated. The jail's seccomp policy must deny all of them too. */
extern const char *const config_never_allowed_syscalls[];

/* Fill *cfg with defaults (strings on the heap; aborts only without memory). */
void config_defaults(struct config *cfg);
/* Load PATH (NULL = defaults only) then environment overrides. Returns 0 or
 * -EINVAL/-ENOENT/...; on error writes "file:line:col: key: reason" (or
 * "env NAME: reason") to err. Warnings (deprecated keys) go to the log.
 * *cfg is overwritten, not freed first; on error it is left zeroed, so
 * config_free() on it is harmless. Unset and empty variables are ignored
 * (but for the rows marked SCHEMA_ENV_EMPTY: shellctl's own). */
int config_load(struct config *cfg, const char *path, config_getenv_fn getenv_fn, char *err,
                size_t errlen);
/* Same, from a buffer (fuzzing, unit tests); name is used in messages. */
int config_load_buffer(struct config *cfg, const char *name, const char *yaml, size_t len,
                       config_getenv_fn getenv_fn, char *err, size_t errlen);
void config_free(struct config *cfg);
/* network.mode is "namespace": runs with network get a namespace of their own. */
bool config_net_namespace(const struct config *cfg);
/* warm.mode is "warm". */
bool config_warm(const struct config *cfg);
/* The last UID of jail.uid_min..uid_max is the dependency installer's
 * (pip's, UID and GID alike): never a run's, never server.user's. Runs
 * get the ones before it, config_run_uids() of them. */
static inline int config_installer_uid(const struct config *cfg)
{
        return cfg->uid_max;
}
static inline int config_run_uids(const struct config *cfg)
{
        return cfg->uid_max - cfg->uid_min;
}
/* Print every key with its effective value (key redacted) in YAML form. */
void config_dump(const struct config *cfg, FILE *out);
/* The same with the secrets (app.key) in clear: loads back to an equal
 * config. Never for a terminal or a log: lockboxd hands it to its HTTP
 * process in a memfd. */
void config_dump_secrets(const struct config *cfg, FILE *out);
/* Markdown table of every key, for docs/CONFIG.md. */
void config_doc(FILE *out);
