/* The config schema: every key lockboxd understands, in the order it is
 * dumped and documented. Sections must stay contiguous (the dumper opens a
 * section when the prefix changes; a unit test checks). Reference keys keep
 * dify-sandbox's names, defaults and environment variables. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <string.h>

#include "base/netaddr.h"
#include "base/parse.h"
#include "base/util.h"
#include "config/schema.h"

static int check_nonempty(const char *v, struct schema_error *e)
{
        return *v ? 0 : schema_fail(e, 0, "must not be empty");
}

static bool has_control(const char *v)
{
        for (; *v; v++)
                if ((unsigned char)*v < 0x20 || *v == 0x7f)
                        return true;
        return false;
}

static int check_path_chars(const char *v, struct schema_error *e)
{
        char q[96];
        if (has_control(v))
                return schema_fail(e, 0, "'%s' contains a control character",
                                   schema_quote(v, q, sizeof(q)));
        return 0;
}

static int check_absolute(const char *v, struct schema_error *e)
{
        char q[96];
        if (v[0] != '/')
                return schema_fail(e, 0, "'%s' is not an absolute path",
                                   schema_quote(v, q, sizeof(q)));
        return check_path_chars(v, e);
}

/* Absolute, no "", "." or ".." component (so no "//" or trailing "/"),
 * and not "/" itself: the jail binds these read-only over its root. */
static int check_optional_absolute(const char *v, struct schema_error *e)
{
        return *v ? check_absolute(v, e) : 0;
}

static int check_ro_path(const char *v, struct schema_error *e)
{
        char q[96];
        int r = check_absolute(v, e);
        if (r < 0)
                return r;
        schema_quote(v, q, sizeof(q));
        if (strcmp(v, "/") == 0)
                return schema_fail(e, 0, "'/' cannot be bound read-only into the jail");
        /* The jail mounts its own /tmp, /proc and /dev: a bind there would be
         * hidden, and the generated /etc files must stay the jail's. */
        static const char *const owned[] = {"/tmp",
                                            "/proc",
                                            "/dev",
                                            "/etc/passwd",
                                            "/etc/group",
                                            "/etc/hostname",
                                            "/etc/hosts",
                                            "/etc/resolv.conf",
                                            "/etc/nsswitch.conf"};
        for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++) {
                size_t n = strlen(owned[i]);
                if (strncmp(v, owned[i], n) == 0 && (v[n] == '/' || v[n] == '\0'))
                        return schema_fail(
                            e, 0, "'%s' is inside %s, which the jail provides itself", q, owned[i]);
        }
        for (const char *p = v + 1;;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && strncmp(p, "..", 2) == 0)
                        return schema_fail(e, 0, "'%s' must not contain '..'", q);
                if (n == 0 || (n == 1 && *p == '.'))
                        return schema_fail(e, 0, "'%s' is not a normalised path", q);
                if (!p[n])
                        return 0;
                p += n + 1;
        }
}

/* shell.home: absolute, normalised, and not "/" (every binding lives below it). */
static int check_shell_home(const char *v, struct schema_error *e)
{
        int r = check_absolute(v, e);
        if (r == 0 && strcmp(v, "/") == 0)
                return schema_fail(e, 0, "shell.home cannot be '/'");
        return r;
}

static int check_warm_mode(const char *v, struct schema_error *e)
{
        char q[96];
        if (strcmp(v, "warm") == 0 || strcmp(v, "cold") == 0)
                return 0;
        return schema_fail(e, 0, "'%s' is not warm or cold", schema_quote(v, q, sizeof(q)));
}

/* A dotted Python module name: identifiers separated by dots. */
static int check_module(const char *v, struct schema_error *e)
{
        char q[96];
        bool start = true;
        for (const char *p = v;; p++) {
                bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
                bool digit = *p >= '0' && *p <= '9';
                if (start ? !alpha : !(alpha || digit || *p == '.' || *p == '\0'))
                        return schema_fail(e, 0, "'%s' is not a Python module name",
                                           schema_quote(v, q, sizeof(q)));
                if (*p == '\0')
                        return 0;
                start = *p == '.';
        }
}

static int check_ip(const char *v, struct schema_error *e);

static int check_listen(const char *v, struct schema_error *e)
{
        return check_ip(v, e);
}

static int check_metrics_listen(const char *v, struct schema_error *e)
{
        char q[96], addr[64];
        int port;
        if (!*v || parse_host_port(v, addr, sizeof(addr), &port) == 0)
                return 0;
        return schema_fail(e, 0, "'%s' is not ADDRESS:PORT (e.g. 127.0.0.1:9090 or [::1]:9090)",
                           schema_quote(v, q, sizeof(q)));
}

static int check_log_format(const char *v, struct schema_error *e)
{
        char q[96];
        if (strcmp(v, "logfmt") == 0 || strcmp(v, "json") == 0)
                return 0;
        return schema_fail(e, 0, "'%s' is not logfmt or json", schema_quote(v, q, sizeof(q)));
}

static int check_hostname(const char *v, struct schema_error *e)
{
        char q[96];
        size_t n = strlen(v);
        bool ok = n >= 1 && n <= 63;
        for (const char *p = v; ok && *p; p++)
                ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '-';
        if (ok)
                return 0;
        return schema_fail(e, 0, "'%s' is not a hostname (1 to 63 letters, digits or '-')",
                           schema_quote(v, q, sizeof(q)));
}

static int check_net_mode(const char *v, struct schema_error *e)
{
        char q[96];
        if (strcmp(v, "namespace") == 0 || strcmp(v, "host") == 0)
                return 0;
        return schema_fail(e, 0, "'%s' is not namespace or host", schema_quote(v, q, sizeof(q)));
}

static int check_subnet(const char *v, struct schema_error *e)
{
        char q[96];
        struct netaddr_prefix p;
        const char *why = NULL;
        if (netaddr_parse_prefix(v, &p, &why) < 0)
                return schema_fail(e, 0, "'%s': %s", schema_quote(v, q, sizeof(q)), why);
        if (p.len > 30)
                return schema_fail(e, 0, "'%s' is too small: at least a /30",
                                   schema_quote(v, q, sizeof(q)));
        return 0;
}

static int check_net_entry(const char *v, struct schema_error *e)
{
        char q[96];
        struct netaddr_entry n;
        const char *why = NULL;
        if (netaddr_parse_entry(v, &n, &why) == 0)
                return 0;
        return schema_fail(e, 0, "'%s': %s (want CIDR, CIDR:port or ADDRESS:port)",
                           schema_quote(v, q, sizeof(q)), why);
}

static int check_ip(const char *v, struct schema_error *e)
{
        unsigned char addr[sizeof(struct in6_addr)];
        char q[96];
        if (inet_pton(AF_INET, v, addr) == 1 || inet_pton(AF_INET6, v, addr) == 1)
                return 0;
        return schema_fail(e, 0, "'%s' is not an IPv4 or IPv6 address",
                           schema_quote(v, q, sizeof(q)));
}

/* One macro per row shape keeps the table one entry per key. */
/* clang-format off */
#define FIELD(f) .offset = offsetof(struct config, f)
/* the field's C type must be the one the row's type writes (compile error
 * otherwise: a negative array size) */
#define TYPED(f, T) .offset = offsetof(struct config, f) + 0 * sizeof(char[ \
        __builtin_types_compatible_p(__typeof__(((struct config *)0)->f), T) ? 1 : -1])
#define INT(key, f, d, lo, hi, env_, doc_) \
        {.name = key, .type = &schema_type_int, TYPED(f, int), .def = d, .min = lo, .max = hi, \
         .env = env_, .doc = doc_}
#define SIZE(key, f, d, lo, hi, doc_) \
        {.name = key, .type = &schema_type_size, TYPED(f, int64_t), .def = d, .min = lo, .max = hi, \
         .doc = doc_}
#define DURATION(key, f, d, lo, hi, env_, doc_) \
        {.name = key, .type = &schema_type_duration, TYPED(f, int64_t), .def = d, .min = lo, \
         .max = hi, .env = env_, .doc = doc_}
#define BOOL(key, f, d, env_, doc_) \
        {.name = key, .type = &schema_type_bool, TYPED(f, bool), .def = d, .env = env_, .doc = doc_}
#define STR(key, f, d, chk, env_, doc_) \
        {.name = key, .type = &schema_type_string, TYPED(f, char *), .def = d, .check = chk, \
         .env = env_, .doc = doc_}
#define SECRET(key, f, d, chk, env_, doc_) \
        {.name = key, .type = &schema_type_string, TYPED(f, char *), .def = d, .check = chk, \
         .env = env_, .flags = SCHEMA_SECRET, .doc = doc_}
#define LIST(key, type_, f, nf, chk, env_, doc_) \
        {.name = key, .type = &type_, FIELD(f), \
         .count_offset = offsetof(struct config, nf), .check = chk, .env = env_, .doc = doc_}
#define LISTDEF(key, type_, f, nf, d, chk, env_, doc_) \
        {.name = key, .type = &type_, FIELD(f), .def = d, \
         .count_offset = offsetof(struct config, nf), .check = chk, .env = env_, .doc = doc_}
/* the same rows, where a set but empty variable counts (SCHEMA_ENV_EMPTY) */
#define STR_ENV_EMPTY(key, f, d, chk, env_, doc_) \
        {.name = key, .type = &schema_type_string, TYPED(f, char *), .def = d, .check = chk, \
         .env = env_, .flags = SCHEMA_ENV_EMPTY, .doc = doc_}
#define LIST_ENV_EMPTY(key, type_, f, nf, d, chk, env_, doc_) \
        {.name = key, .type = &type_, FIELD(f), .def = d, \
         .count_offset = offsetof(struct config, nf), .check = chk, .env = env_, \
         .flags = SCHEMA_ENV_EMPTY, .doc = doc_}
#define DEPRECATED(key, env_, doc_) \
        {.name = key, .type = &schema_type_deprecated, .env = env_, \
         .flags = SCHEMA_DEPRECATED, .doc = doc_}
#define K (INT64_C(1) << 10)
#define M (INT64_C(1) << 20)
#define G (INT64_C(1) << 30)
#define HOURS 3600

const struct schema_row schema_rows[] = {
        INT("app.port", port, "8194", 1, 65535, "SANDBOX_PORT",
            "TCP port of the HTTP API."),
        BOOL("app.debug", debug, "false", "DEBUG",
             "Log debug events."),
        SECRET("app.key", key, "dify-sandbox", check_nonempty, "API_KEY",
               "API key clients send in X-Api-Key. Change it. Never printed."),
        INT("max_workers", max_workers, "4", 1, 256, "MAX_WORKERS",
            "Runs executing at once; more wait in line."),
        INT("max_requests", max_requests, "50", 1, 100000, "MAX_REQUESTS",
            "Runs in flight (executing plus waiting); more are refused."),
        INT("worker_timeout", worker_timeout, "5", 1, 3600, "WORKER_TIMEOUT",
            "Wall-clock limit of one run, in seconds."),
        STR("python_path", python_path, "/usr/bin/python3", check_absolute, "PYTHON_PATH",
            "Python 3 interpreter (absolute path); its libraries are found from it."),
        DEPRECATED("python_lib_path", "PYTHON_LIB_PATH",
                   "Deprecated and ignored: library paths come from python_path."),
        STR("python_pip_mirror_url", python_pip_mirror_url, "", NULL, "PIP_MIRROR_URL",
            "Package index (pip --index-url) for dependency installs; an http:// mirror "
            "is trusted without more flags. Empty: pip's default (PyPI)."),
        DURATION("python_deps_update_interval", python_deps_update_interval, "30m",
                 0, 8760 * HOURS, "PYTHON_DEPS_UPDATE_INTERVAL",
                 "How often the requirements file is checked; pip runs only when it changed "
                 "since the current layer was built. 0 or empty: only at start-up and on "
                 "the update/refresh routes."),
        STR("nodejs_path", nodejs_path, "/usr/bin/node", check_absolute, "NODEJS_PATH",
            "Node.js interpreter (absolute path)."),
        BOOL("enable_network", enable_network, "true", "ENABLE_NETWORK",
             "Let runs that ask for it reach the network (through the proxies if set)."),
        BOOL("enable_preload", enable_preload, "false", "ENABLE_PRELOAD",
             "Run the request's preload code before the user's code."),
        LIST("allowed_syscalls", schema_type_syscalls, allowed_syscalls, n_allowed_syscalls,
             NULL, "ALLOWED_SYSCALLS",
             "Extra system calls to allow, by number or name (environment: "
             "comma-separated). Calls that would undo the jail are refused."),
        STR("log_path", log_path, "", check_path_chars, NULL,
            "Directory for lockboxd.log (lines go to stderr as well); empty logs to stderr "
            "only. SIGHUP reopens the file, for log rotation."),
        STR("proxy.socks5", proxy_socks5, "", NULL, "SOCKS5_PROXY",
            "SOCKS5 proxy for networked runs."),
        STR("proxy.http", proxy_http, "", NULL, "HTTP_PROXY",
            "HTTP proxy for networked runs."),
        STR("proxy.https", proxy_https, "", NULL, "HTTPS_PROXY",
            "HTTPS proxy for networked runs."),

        BOOL("compat.stderr_is_error", stderr_is_error, "false", NULL,
             "true: a run that exits 0 but wrote to stderr gets that stderr as data.error, "
             "as dify-sandbox 0.2.15 and earlier do (Dify then fails the node); false: "
             "error stays empty for exit code 0, as in dify-sandbox after 0.2.15."),

        STR("server.listen", listen, "0.0.0.0", check_listen, NULL,
            "IPv4 or IPv6 address the HTTP API binds."),
        SIZE("server.max_body_bytes", max_body_bytes, "16M", 1 * K, 1 * G,
             "Largest request body accepted."),
        STR("server.user", user, "nobody", check_nonempty, NULL,
            "Unprivileged account the HTTP process runs as."),
        INT("server.connection_timeout", connection_timeout, "30", 1, 3600, NULL,
            "Seconds an idle client connection is kept."),
        INT("server.header_timeout", header_timeout, "10", 1, 3600, NULL,
            "Seconds a request's headers may take to arrive in full, counted from the "
            "connection's accept (or, on a kept-alive connection, from the end of the "
            "previous request plus server.connection_timeout); a slower client is "
            "disconnected."),
        INT("server.body_timeout", body_timeout, "60", 1, 3600, NULL,
            "Seconds a request's body may take to arrive in full, counted from the end of its "
            "headers; a slower client is disconnected."),
        INT("server.max_connections", max_connections, "256", 4, 10000, NULL,
            "Client connections served at once."),
        INT("server.max_connections_per_ip", max_connections_per_ip, "128", 1, 10000, NULL,
            "Client connections one IP address may hold at once (more are closed at accept), "
            "so one client cannot take every connection; at most server.max_connections."),
        STR("server.log_format", log_format, "logfmt", check_log_format, NULL,
            "Log line format: logfmt (key=value) or json (one object per line)."),
        BOOL("server.metrics", metrics, "true", NULL,
             "Serve Prometheus metrics at GET /metrics (no API key)."),
        STR("server.metrics_listen", metrics_listen, "", check_metrics_listen, NULL,
            "Serve /metrics on its own ADDRESS:PORT (e.g. 127.0.0.1:9090) instead of the API's "
            "port; the API port then answers /metrics with 404."),

        SIZE("limits.memory", memory_bytes, "512M", 16 * M, 64 * G,
             "Memory of one run, socket buffers included: on cgroup v1, which counts them "
             "apart, min(limit / 8, 64 MiB) of it is for socket buffers and the rest for the "
             "run's memory."),
        INT("limits.processes", processes, "64", 4, 4096, NULL,
            "Tasks (processes and threads) of one run."),
        SIZE("limits.output", output_bytes, "8M", 1 * K, 1 * G,
             "Output one run may produce, stdout and stderr together."),
        SIZE("limits.tmp_size", tmp_bytes, "64M", 1 * M, 16 * G,
             "Size of a run's /tmp."),
        INT("limits.tmp_inodes", tmp_inodes, "4096", 16, 1000000, NULL,
            "Files and directories in a run's /tmp."),
        INT("limits.cpu_time", cpu_seconds, "30", 1, 86400, NULL,
            "CPU seconds of one run."),
        INT("limits.open_files", open_files, "256", 16, 65536, NULL,
            "Open files per run (RLIMIT_NOFILE)."),
        SIZE("limits.file_size", file_bytes, "64M", 1 * K, 16 * G,
             "Largest file a run may write."),

        INT("jail.uid_min", uid_min, "10000", 1000, 2000000000, NULL,
            "First UID of the pool runs execute as."),
        INT("jail.uid_max", uid_max, "10999", 1000, 2000000000, NULL,
            "Last UID of the pool. It is the dependency installer's (pip runs as it, never a "
            "run); the UIDs before it are the runs': at least max_workers plus the warm pools."),
        LIST("jail.extra_ro_paths", schema_type_strlist, extra_ro_paths, n_extra_ro_paths,
             check_ro_path, NULL,
             "Extra absolute paths bound read-only into the jail (environment: "
             "comma-separated)."),
        STR("jail.hostname", hostname, "sandbox", check_hostname, NULL,
            "Hostname runs see (1 to 63 letters, digits or '-')."),

        STR("network.mode", net_mode, "namespace", check_net_mode, NULL,
            "namespace: each run with network gets a network namespace of its own, linked to "
            "the host by a veth pair, with the egress policy below enforced by nftables; "
            "host: runs share the host's network (unsafe: they reach the host's loopback, "
            "private networks and cloud metadata)."),
        STR("network.subnet", net_subnet, "10.191.0.0/16", check_subnet, NULL,
            "IPv4 range of run addresses (namespace mode): the first address after the "
            "network one is the runs' gateway and DNS relay; it must hold the UID pool plus "
            "two addresses and must not overlap the host's networks."),
        LIST("network.allow", schema_type_strlist, net_allow, n_net_allow, check_net_entry,
             NULL,
             "Destinations opened in spite of the default denials (private, link-local, ...): "
             "CIDR, CIDR:port or ADDRESS:port; a port opens TCP and UDP (environment: "
             "comma-separated)."),
        LIST("network.egress_only", schema_type_strlist, net_egress_only, n_net_egress_only,
             check_net_entry, NULL,
             "When not empty, the only destinations runs reach (ADDRESS:port, CIDR:port or "
             "CIDR), besides DNS through the gateway and the proxies (environment: "
             "comma-separated)."),
        LIST("network.dns_servers", schema_type_strlist, net_dns_servers, n_net_dns_servers,
             check_ip, NULL,
             "Resolvers the gateway relays runs' DNS queries to (UDP and TCP port 53). Empty: "
             "the nameservers of /etc/resolv.conf at start-up (environment: comma-separated)."),
        INT("network.max_connections", net_max_connections, "1000", 0, 100000, NULL,
            "Connections one run may hold at once (namespace mode), TCP and UDP, to the world "
            "and to its DNS relay alike: conntrack entries of its address; one more is refused "
            "(ECONNREFUSED). Closed TCP connections do not count; a UDP one counts until "
            "conntrack forgets it (by default 30 s unanswered, 120 s once both sides talked for "
            "2 s), a UDP query to the DNS relay 2 s (where the kernel has conntrack timeout "
            "policies). It bounds the masquerade ports a run takes to one ADDRESS:port (about 64,500 "
            "there are), and what runs add to the host's conntrack table (nf_conntrack_max): "
            "max_workers x this at most from running runs. 1000: a scraper with a few hundred "
            "connections and their DNS lookups fits; 4 runs sweeping ports take at most 4,000. "
            "0: no bound."),
        INT("network.new_connections_per_second", net_new_connections_per_second, "200", 0,
            1000000, NULL,
            "New connections one run may open per second (namespace mode), with a burst of "
            "as many at once; beyond, its new connection is dropped (TCP sends it again a "
            "second later: a delay, not an error). Packets of open connections are never "
            "limited. It bounds how fast a run churns through conntrack entries and ports "
            "that outlive their connections. 0: no bound."),

        STR("warm.mode", warm_mode, "warm", check_warm_mode, NULL,
             "warm: runs start from pre-started, already locked processes (Python forked from "
             "a zygote that has imported warm.python_preload; Node.js pre-started), refilled "
             "in the background; cold: every run starts its interpreter, as dify-sandbox does."),
        INT("warm.python_pool", python_pool, "4", 0, 64, NULL,
            "Armed Python processes kept waiting for code (warm mode); each holds a UID."),
        INT("warm.nodejs_pool", nodejs_pool, "2", 0, 64, NULL,
            "Armed Node.js processes kept waiting for code (warm mode); each holds a UID."),
        INT("warm.zygote_max_runs", zygote_max_runs, "10000", 0, 100000000, NULL,
            "Python runs one zygote serves before a fresh one replaces it (0: no limit). Warm "
            "runs of one zygote share its address-space layout and pointer guard; a "
            "replacement is started and ready before the old zygote retires."),
        DURATION("warm.zygote_max_age", zygote_max_age, "1h", 0, 30 * 24 * 3600, NULL,
                 "How long one zygote serves before a fresh one replaces it (0: no limit)."),
        LISTDEF("warm.python_preload", schema_type_strlist, python_preload, n_python_preload,
                "json,base64,re,datetime,math,random,collections,typing,requests,httpx,jinja2",
                check_module, NULL,
             "Modules the Python zygote imports once, before any run (comma-separated in the "
             "environment)."),

        BOOL("shell.enabled", shell_enabled, "false", NULL,
             "Serve Dify's shell-job API (the Agent V2 shellctl runtime) on shell.port beside the "
             "code-run API; jobs run in the jail (docs/API.md \"Shell jobs\")."),
        INT("shell.port", shell_port, "5004", 1, 65535, NULL,
            "Port of the shell-job API (Dify's local_sandbox service listens on 5004)."),
        STR("shell.listen", shell_listen, "0.0.0.0", check_listen, NULL,
            "IPv4 or IPv6 address the shell-job API binds."),
        SECRET("shell.token", shell_token, "", NULL, "SHELLCTL_AUTH_TOKEN",
               "Bearer token of the shell-job API (Authorization: Bearer TOKEN). Empty: every "
               "route is open to anyone who reaches the port, as the reference does; unsafe "
               "beyond a private network."),
        STR("shell.state_dir", shell_state_dir, "/var/lib/lockbox/shell", check_absolute, NULL,
            "Directory (root's) of job records and output: jobs/<id>/output.log is the "
            "output_path the API reports."),
        STR("shell.home", shell_home, "/home/dify", check_shell_home, NULL,
            "Default HOME and working directory of jobs, and the tree every binding's HOME "
            "and workspace must lie in; a job without HOME (a control script) sees all of it."),
        INT("shell.uid", shell_uid, "11000", 1000, 2000000000, NULL,
            "UID (and GID) shell jobs run as; it owns the files under shell.home. It must "
            "lie outside jail.uid_min..jail.uid_max."),
        SIZE("shell.disk_size", shell_disk_bytes, "8G", 0, 16384 * G,
             "Size of the file system of shell.home: an image (sparse) under "
             "shell.state_dir, mounted at shell.home, so jobs can never fill the host's disk; "
             "at the bound a write fails with \"No space left on device\". Needs a loop "
             "device and mkfs.btrfs; shell.home must be empty at the first start. 0: shell.home "
             "stays on the host's file system, with no bound. A new image is btrfs (mkfs.btrfs; "
             "mixed block groups below 1 GiB), which per-binding bounds (shell.binding_disk, "
             "shell.workspace_disk) need; an ext4 image made by an earlier version keeps "
             "working, without them."),
        SIZE("shell.binding_disk", shell_binding_disk_bytes, "1G", 0, 16384 * G,
             "Disk one binding's HOME may hold (data and metadata, reflinked data counted in "
             "full): the HOME becomes a btrfs subvolume with a quota group limit before the "
             "binding's first job (an existing directory is moved in with reflinks); at the "
             "bound a write fails with \"Disk quota exceeded\". Needs a btrfs shell.disk_size "
             "image. 0: no bound but shell.disk_size's."),
        SIZE("shell.workspace_disk", shell_workspace_disk_bytes, "2G", 0, 16384 * G,
             "Disk one workspace (the first two levels of a job's cwd below shell.home, which "
             "several bindings may share) may hold, as shell.binding_disk for a HOME. 0: no "
             "bound but shell.disk_size's."),
        SIZE("shell.max_output", shell_max_output, "64M", 64 * K, 16 * G,
             "Output one job may write to its output.log (the rest is dropped, with a line "
             "saying so on a terminal), and a stdio job to its stderr.log."),
        INT("shell.max_jobs", shell_max_jobs, "64", 1, 4096, NULL,
            "Jobs alive at once (running, or finished with processes left); one more run "
            "is refused with 429 too_many_jobs."),
        BOOL("shell.keep_jobs", shell_keep_jobs, "true", NULL,
             "Jobs running when lockboxd stops (SIGTERM, or killed) keep running, with their "
             "bindings; the next lockboxd finds them again from its records in "
             "shell.state_dir (running, or how they ended meanwhile). false: a stop ends every "
             "job (a kill still leaves them to the next start)."),
        DURATION("shell.retention", shell_retention, "300", 0, 30 * 24 * HOURS, NULL,
                 "How long a finished job and its output are kept before they are removed "
                 "(the reference keeps them 300 s)."),
        DURATION("shell.binding_linger", shell_binding_linger, "60", 0, 24 * HOURS, NULL,
                 "How long a binding whose last job was removed keeps its namespaces and its "
                 "spare (a job's keeper and first process made ready ahead, in its mount "
                 "view) for the binding's next job; Dify's control scripts and file transfers "
                 "are each one job, run and removed. Nothing of the removed jobs is left in "
                 "it: their processes ended with them. 0: a binding ends with its last job."),
        DURATION("shell.job_timeout", shell_job_timeout, "1h", 1, 30 * 24 * HOURS, NULL,
                 "Wall-clock limit of one job: then it is interrupted, and killed with every "
                 "process it made 10 s later. Dify's timeout field is how long a call waits, "
                 "not a limit."),
        SIZE("shell.memory", shell_memory_bytes, "1G", 16 * M, 256 * G,
             "Memory of one job, every process it made included."),
        INT("shell.processes", shell_processes, "256", 8, 65536, NULL,
            "Tasks (processes and threads) of one job."),
        SIZE("shell.binding_memory", shell_binding_memory_bytes, "2G", 16 * M, 1024 * G,
             "Memory of all the jobs of one binding together (what their finished jobs left "
             "running included)."),
        INT("shell.cpu_weight", shell_cpu_weight, "100", 1, 10000, NULL,
            "CPU weight of each binding (cgroup cpu.weight; 100 is the default share, v1's "
            "cpu.shares 1024): under contention bindings share the CPU in proportion, "
            "however many processes each runs; the jobs of a binding share its part "
            "equally."),
        INT("shell.binding_processes", shell_binding_processes, "512", 8, 1000000, NULL,
            "Tasks of all the jobs of one binding together."),
        DURATION("shell.snapshot_timeout", shell_snapshot_timeout, "45", 1, 24 * HOURS,
                 "SHELLCTL_SNAPSHOT_TIMEOUT",
                 "Longest one snapshot save or restore of shell.home may take; then its worker "
                 "is killed and the call fails (a save's stream is cut)."),
        SIZE("shell.snapshot_max_bytes", shell_snapshot_max_bytes, "1G", 1 * M, 1024 * G,
             "Bound of a snapshot: bytes of the archive (saved or uploaded) and, separately, "
             "bytes of file data it holds when unpacked."),
        INT("shell.snapshot_max_entries", shell_snapshot_max_entries, "100000", 16, 100000000,
            NULL, "Bound of a snapshot: files, directories and links in one archive."),
        STR_ENV_EMPTY("shell.path_isolation", shell_path_isolation, "true", NULL,
            "SHELLCTL_ENABLE_PATH_ISOLATION",
            "Landlock path rules on top of the job's mount view: exactly \"true\" is on, any "
            "other value off, an empty variable too (as the reference reads it). The mount view "
            "and the rest of the jail stay either way."),
        LIST_ENV_EMPTY("shell.landlock_rw_paths", schema_type_strlist, shell_landlock_rw,
             n_shell_landlock_rw, NULL, check_absolute, "SHELLCTL_LANDLOCK_RW_PATHS",
             "Extra host directories jobs may write, bound read-write into their view "
             "(environment: comma-separated; set and empty: none)."),
        LIST_ENV_EMPTY("shell.landlock_ro_paths", schema_type_strlist, shell_landlock_ro,
                n_shell_landlock_ro,
                "/usr,/bin,/sbin,/lib,/lib64,/etc,/proc,/opt/dify-agent-tools,/opt/homebrew,/snap",
                check_absolute, "SHELLCTL_LANDLOCK_RO_PATHS",
                "Directories jobs may read and execute (Landlock); those that exist and are not "
                "/etc, /proc or /dev (the jail builds its own) are bound read-only into their "
                "view (environment: comma-separated; set and empty: none, as the reference)."),
        LIST_ENV_EMPTY("shell.landlock_rw_dev_paths", schema_type_strlist, shell_landlock_rw_dev,
                n_shell_landlock_rw_dev, "/dev/null,/dev/zero,/dev/urandom,/dev/random,/dev/tty",
                check_absolute, "SHELLCTL_LANDLOCK_RW_DEV_PATHS",
                "Device files jobs may open read-write (Landlock; environment: comma-separated; "
                "set and empty: none)."),

        STR("dependencies.python_requirements", python_requirements,
            "dependencies/python-requirements.txt", NULL, NULL,
            "pip requirements file for the shared dependency layer (relative paths from "
            "the working directory); an empty value or a file that is absent: no packages, "
            "pip never runs."),
        STR("dependencies.layer_dir", layer_dir, "/var/lib/lockbox/python-deps", check_absolute,
            NULL,
            "Directory (root's) where dependency layers are built; runs see the current one "
            "read-only at /opt/lockbox/python, at the end of sys.path."),
        STR("dependencies.wheel_dir", wheel_dir, "", check_optional_absolute, NULL,
            "Directory of wheels for air-gapped hosts: pip installs from it alone "
            "(--no-index --find-links); it must be readable by pip, which runs as jail.uid_max (checked at "
            "start-up). Empty: pip uses python_pip_mirror_url or PyPI."),
        BOOL("dependencies.allow_source_builds", source_builds, "false", NULL,
             "Let pip build packages from source (runs their setup code, as the install "
             "user); off: wheels only."),
        DURATION("dependencies.install_timeout", install_timeout, "10m", 10, 3600, NULL,
                 "Longest a pip install may take."),
};
/* clang-format on */

const size_t schema_n_rows = ELEMENTSOF(schema_rows);

const struct schema_row *schema_find(const char *name)
{
        for (size_t i = 0; i < schema_n_rows; i++)
                if (strcmp(schema_rows[i].name, name) == 0)
                        return &schema_rows[i];
        return NULL;
}

size_t schema_section_len(const char *name)
{
        const char *dot = strchr(name, '.');
        return dot ? (size_t)(dot - name) : 0;
}

bool schema_is_section(const char *name, size_t len)
{
        for (size_t i = 0; i < schema_n_rows && len > 0; i++)
                if (schema_section_len(schema_rows[i].name) == len &&
                    strncmp(schema_rows[i].name, name, len) == 0)
                        return true;
        return false;
}

int schema_env_name(const struct schema_row *row, char *buf, size_t len)
{
        int n = row->env ? snprintf(buf, len, "%s", row->env)
                         : snprintf(buf, len, "LOCKBOX_%s", row->name);
        if (n < 0 || (size_t)n >= len)
                return -ENOBUFS;
        for (char *p = buf; !row->env && *p; p++)
                *p = *p == '.' ? '_' : (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
        return 0;
}
