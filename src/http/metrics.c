/* Prometheus metrics (see metrics.h). Counters are relaxed atomics bumped
 * by the connection threads; a scrape reads them without stopping anyone,
 * so one scrape may see a request counted before its run (never the
 * reverse of a counter going down). */
#include "net/egress.h"
#include "http/metrics.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "base/version.h"
#include "ipc/proto.h"
#include "ipc/stats.h"
#include "net/dnsrelay.h"

static const char *const route_names[] = {
    "/health",
    "/ready",
    "/metrics",
    "/v1/sandbox/run",
    "/v1/sandbox/dependencies",
    "/v1/sandbox/dependencies/update",
    "/v1/sandbox/dependencies/refresh",
    "other", /* unknown paths, and requests refused before routing */
};
#define N_ROUTES ELEMENTSOF(route_names)
#define STATUS_MIN 100
#define STATUS_MAX 599

static const char *const outcome_names[OUTCOME_COUNT] = {
    [OUTCOME_OK] = "ok",
    [OUTCOME_RUNTIME_ERROR] = "runtime_error",
    [OUTCOME_TIMEOUT] = "timeout",
    [OUTCOME_SYSCALL_DENIED] = "syscall_denied",
    [OUTCOME_MEMORY_LIMIT] = "memory_limit",
    [OUTCOME_OUTPUT_LIMIT] = "output_limit",
    [OUTCOME_ERROR] = "error",
};

static const char *const lang_names[STATS_LANGS] = {
    [LANG_PYTHON3] = "python3",
    [LANG_NODEJS] = "nodejs",
};

/* Upper bounds in microseconds; +Inf is implicit. */
static const uint64_t bucket_us[] = {1000,    2500,    5000,     10000,    25000,
                                     50000,   100000,  250000,   500000,   1000000,
                                     2500000, 5000000, 10000000, 30000000, 60000000};
#define N_BUCKETS ELEMENTSOF(bucket_us)

struct histogram {
        atomic_ulong bucket[N_BUCKETS + 1]; /* not cumulative; the last is +Inf */
        atomic_ulong count, sum_us;
};

#define MAX_SYSCALLS 64

static struct {
        const struct shared_stats *shared;
        const char *layer_dir;
        const struct dns_relay *_Atomic dns;
        atomic_ulong requests[N_ROUTES][STATUS_MAX - STATUS_MIN + 1];
        atomic_ulong runs[STATS_LANGS][OUTCOME_COUNT];
        atomic_ulong warm_runs[STATS_LANGS];
        struct histogram run_time[STATS_LANGS], queue_time[STATS_LANGS];
        atomic_int queued;
        atomic_ulong refused_runs;
        atomic_ulong deadline_missed[2]; /* headers, body */
        pthread_mutex_t lock;            /* guards the syscall table */
        char syscall_name[MAX_SYSCALLS][32];
        unsigned long syscall_count[MAX_SYSCALLS];
        unsigned n_syscalls;
        unsigned long syscall_other;
} m = {.lock = PTHREAD_MUTEX_INITIALIZER};

void metrics_init(const struct shared_stats *shared, const char *layer_dir)
{
        m.shared = shared;
        m.layer_dir = layer_dir;
}

static size_t route_index(const char *route)
{
        for (size_t i = 0; route && i < N_ROUTES - 1; i++)
                if (strcmp(route_names[i], route) == 0)
                        return i;
        return N_ROUTES - 1;
}

void metrics_request(const char *route, unsigned status)
{
        if (status < STATUS_MIN || status > STATUS_MAX)
                return;
        atomic_fetch_add_explicit(&m.requests[route_index(route)][status - STATUS_MIN], 1,
                                  memory_order_relaxed);
}

enum metrics_outcome metrics_outcome_of(const char *status)
{
        for (int i = 0; status && i < OUTCOME_ERROR; i++)
                if (strcmp(outcome_names[i], status) == 0)
                        return (enum metrics_outcome)i;
        return OUTCOME_ERROR;
}

static void observe(struct histogram *h, uint64_t us)
{
        size_t b = 0;
        while (b < N_BUCKETS && us > bucket_us[b])
                b++;
        atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

static void count_syscall(const char *name)
{
        pthread_mutex_lock(&m.lock);
        unsigned i = 0;
        while (i < m.n_syscalls && strcmp(m.syscall_name[i], name) != 0)
                i++;
        if (i == m.n_syscalls && i < MAX_SYSCALLS) {
                /* a label value: letters, digits and '_' only */
                size_t k = 0;
                for (; name[k] && k < sizeof(m.syscall_name[i]) - 1; k++) {
                        char c = name[k];
                        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '_';
                        m.syscall_name[i][k] = ok ? c : '_';
                }
                m.syscall_name[i][k] = '\0';
                m.n_syscalls++;
        }
        if (i < MAX_SYSCALLS)
                m.syscall_count[i]++;
        else
                m.syscall_other++;
        pthread_mutex_unlock(&m.lock);
}

void metrics_run(int lang, const char *status, const char *syscall, bool warm, uint64_t queue_us,
                 uint64_t run_us)
{
        if (lang <= 0 || lang >= STATS_LANGS)
                return;
        enum metrics_outcome o = metrics_outcome_of(status);
        atomic_fetch_add_explicit(&m.runs[lang][o], 1, memory_order_relaxed);
        if (warm)
                atomic_fetch_add_explicit(&m.warm_runs[lang], 1, memory_order_relaxed);
        observe(&m.queue_time[lang], queue_us);
        if (o != OUTCOME_ERROR)
                observe(&m.run_time[lang], run_us);
        if (o == OUTCOME_SYSCALL_DENIED && syscall && *syscall)
                count_syscall(syscall);
}

void metrics_refused_run_connection(void)
{
        atomic_fetch_add_explicit(&m.refused_runs, 1, memory_order_relaxed);
}

void metrics_deadline_missed(bool body)
{
        atomic_fetch_add_explicit(&m.deadline_missed[body], 1, memory_order_relaxed);
}

void metrics_set_dns_relay(const struct dns_relay *relay)
{
        atomic_store(&m.dns, relay);
}

void metrics_queued(int delta)
{
        atomic_fetch_add(&m.queued, delta);
}

/* ---- rendering ---------------------------------------------------------------- */

static unsigned long get(atomic_ulong *v)
{
        return atomic_load_explicit(v, memory_order_relaxed);
}

static void header(struct strbuf *sb, const char *name, const char *type, const char *help)
{
        strbuf_appendf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_requests(struct strbuf *sb)
{
        header(sb, "lockbox_http_refused_run_connections_total", "counter",
               "Connections to lockboxd refused because a sandbox run opened them.");
        strbuf_appendf(sb, "lockbox_http_refused_run_connections_total %lu\n",
                       get(&m.refused_runs));
        header(sb, "lockbox_http_deadline_closed_total", "counter",
               "Connections closed because their request's headers or body did not arrive in "
               "full in time (server.header_timeout, server.body_timeout).");
        for (int body = 0; body < 2; body++)
                strbuf_appendf(sb, "lockbox_http_deadline_closed_total{phase=\"%s\"} %lu\n",
                               body ? "body" : "headers", get(&m.deadline_missed[body]));
        header(sb, "lockbox_http_requests_total", "counter",
               "HTTP requests answered, by route and status code.");
        for (size_t r = 0; r < N_ROUTES; r++)
                for (unsigned s = 0; s <= STATUS_MAX - STATUS_MIN; s++) {
                        unsigned long v = get(&m.requests[r][s]);
                        if (v)
                                strbuf_appendf(
                                    sb,
                                    "lockbox_http_requests_total{route=\"%s\",code=\"%u\"} "
                                    "%lu\n",
                                    route_names[r], s + STATUS_MIN, v);
                }
}

static void render_histogram(struct strbuf *sb, const char *name, struct histogram *hs)
{
        for (size_t l = 1; l < STATS_LANGS; l++) {
                struct histogram *h = &hs[l];
                unsigned long cum = 0;
                for (size_t b = 0; b <= N_BUCKETS; b++) {
                        cum += get(&h->bucket[b]);
                        if (b < N_BUCKETS)
                                strbuf_appendf(sb, "%s_bucket{language=\"%s\",le=\"%g\"} %lu\n",
                                               name, lang_names[l], (double)bucket_us[b] / 1e6,
                                               cum);
                        else
                                strbuf_appendf(sb, "%s_bucket{language=\"%s\",le=\"+Inf\"} %lu\n",
                                               name, lang_names[l], cum);
                }
                strbuf_appendf(sb, "%s_sum{language=\"%s\"} %.6f\n", name, lang_names[l],
                               (double)get(&h->sum_us) / 1e6);
                strbuf_appendf(sb, "%s_count{language=\"%s\"} %lu\n", name, lang_names[l],
                               get(&h->count));
        }
}

static void render_runs(struct strbuf *sb, int in_flight)
{
        header(sb, "lockbox_runs_total", "counter",
               "Runs handed to the sandbox, by language and outcome (error: no verdict, the "
               "sandbox could not run it).");
        for (size_t l = 1; l < STATS_LANGS; l++)
                for (int o = 0; o < OUTCOME_COUNT; o++)
                        strbuf_appendf(sb,
                                       "lockbox_runs_total{language=\"%s\",outcome=\"%s\"} %lu\n",
                                       lang_names[l], outcome_names[o], get(&m.runs[l][o]));
        header(sb, "lockbox_warm_runs_total", "counter",
               "Runs served by an armed (pre-started) process.");
        for (size_t l = 1; l < STATS_LANGS; l++)
                strbuf_appendf(sb, "lockbox_warm_runs_total{language=\"%s\"} %lu\n", lang_names[l],
                               get(&m.warm_runs[l]));
        header(sb, "lockbox_run_duration_seconds", "histogram",
               "Time from a worker slot to the run's result, by language.");
        render_histogram(sb, "lockbox_run_duration_seconds", m.run_time);
        header(sb, "lockbox_run_queue_seconds", "histogram",
               "Time a run waited for one of max_workers slots, by language.");
        render_histogram(sb, "lockbox_run_queue_seconds", m.queue_time);
        int queued = atomic_load(&m.queued);
        header(sb, "lockbox_runs_in_flight", "gauge", "Runs holding a worker slot now.");
        strbuf_appendf(sb, "lockbox_runs_in_flight %d\n",
                       in_flight - queued > 0 ? in_flight - queued : 0);
        header(sb, "lockbox_runs_queued", "gauge", "Runs waiting for a worker slot now.");
        strbuf_appendf(sb, "lockbox_runs_queued %d\n", queued);
}

static void render_syscalls(struct strbuf *sb)
{
        header(sb, "lockbox_denied_syscalls_total", "counter",
               "Runs ended for a forbidden system call, by the call's name.");
        pthread_mutex_lock(&m.lock);
        for (unsigned i = 0; i < m.n_syscalls; i++)
                strbuf_appendf(sb, "lockbox_denied_syscalls_total{syscall=\"%s\"} %lu\n",
                               m.syscall_name[i], m.syscall_count[i]);
        if (m.syscall_other)
                strbuf_appendf(sb, "lockbox_denied_syscalls_total{syscall=\"other\"} %lu\n",
                               m.syscall_other);
        pthread_mutex_unlock(&m.lock);
}

static void by_lang_and_network(struct strbuf *sb, const char *name, const char *help,
                                const atomic_uint (*v)[2])
{
        header(sb, name, "gauge", help);
        for (size_t l = 1; l < STATS_LANGS; l++)
                for (int net = 0; net <= 1; net++)
                        strbuf_appendf(sb, "%s{language=\"%s\",network=\"%s\"} %u\n", name,
                                       lang_names[l], net ? "true" : "false",
                                       atomic_load(&v[l][net]));
}

/* One family of the idle-namespace pools, by network mode. */
static void by_network(struct strbuf *sb, const char *name, const char *type, const char *help,
                       unsigned long v[2])
{
        header(sb, name, type, help);
        for (int net = 0; net <= 1; net++)
                strbuf_appendf(sb, "%s{network=\"%s\"} %lu\n", name, net ? "true" : "false",
                               v[net]);
}

static void render_namespaces(struct strbuf *sb, const struct shared_stats *s)
{
        unsigned long v[2];
#define LOAD(field) (v[0] = atomic_load(&s->field[0]), v[1] = atomic_load(&s->field[1]), v)
        by_network(sb, "lockbox_netns_reused_total", "counter",
                   "Run network namespaces that served another run (checked unchanged once "
                   "settled).",
                   LOAD(netns_reused));
        by_network(sb, "lockbox_netns_changed_total", "counter",
                   "Run network namespaces let go because their run changed what a later run "
                   "could read of them.",
                   LOAD(netns_changed));
        by_network(sb, "lockbox_netns_sockets_destroyed_total", "counter",
                   "Sockets runs left behind in their namespaces, destroyed after the run.",
                   LOAD(netns_sockets_destroyed));
        by_network(sb, "lockbox_netns_abandoned_total", "counter",
                   "Ended namespaces let go with sockets that could not be destroyed.",
                   LOAD(netns_abandoned));
        by_network(sb, "lockbox_netns_idle", "gauge", "Run network namespaces ready for a run.",
                   LOAD(netns_idle));
        by_network(sb, "lockbox_netns_settling", "gauge",
                   "Ended runs' namespaces waiting for their check.", LOAD(netns_settling));
        by_network(sb, "lockbox_netns_lingering", "gauge",
                   "Ended runs' namespaces kept while sockets left in them are destroyed.",
                   LOAD(netns_lingering));
#undef LOAD
}

static void render_pools(struct strbuf *sb)
{
        const struct shared_stats *s = m.shared;
        if (!s)
                return;
        by_lang_and_network(sb, "lockbox_pool_armed",
                            "Armed processes waiting for a run, by language and network mode.",
                            s->armed);
        by_lang_and_network(sb, "lockbox_pool_starting",
                            "Processes starting to refill a pool, by language and network mode.",
                            s->spawning);
        header(sb, "lockbox_pool_target", "gauge",
               "Armed processes each pool keeps (warm.python_pool, warm.nodejs_pool).");
        for (size_t l = 1; l < STATS_LANGS; l++)
                strbuf_appendf(sb, "lockbox_pool_target{language=\"%s\"} %u\n", lang_names[l],
                               atomic_load(&s->pool_target[l]));
        header(sb, "lockbox_runtime_available", "gauge",
               "1 when the language's interpreter was found at start-up.");
        for (size_t l = 1; l < STATS_LANGS; l++)
                strbuf_appendf(sb, "lockbox_runtime_available{language=\"%s\"} %u\n", lang_names[l],
                               atomic_load(&s->runtime[l]));
        header(sb, "lockbox_spawn_failures_total", "counter",
               "Sandbox processes that ended before they could serve a run.");
        strbuf_appendf(sb, "lockbox_spawn_failures_total %lu\n", atomic_load(&s->spawn_failures));
        header(sb, "lockbox_network_refused_total", "counter",
               "Packets of runs refused by the egress policy, by reason (read once a second).");
        for (size_t i = 0; i < EGRESS_REASONS; i++)
                strbuf_appendf(sb, "lockbox_network_refused_total{reason=\"%s\"} %lu\n",
                               egress_reason_names[i], atomic_load(&s->net_refused[i]));
        render_namespaces(sb, s);
}

static void render_dns(struct strbuf *sb)
{
        const struct dns_relay *r = atomic_load(&m.dns);
        if (!r)
                return;
        struct dns_relay_counts c;
        dns_relay_counts(r, &c);
        static const struct {
                const char *name, *help;
                size_t offset;
        } plain[] = {
            {"lockbox_dns_queries_total", "Runs' DNS queries relayed to network.dns_servers.",
             offsetof(struct dns_relay_counts, queries)},
            {"lockbox_dns_answers_total", "Upstream answers returned to runs.",
             offsetof(struct dns_relay_counts, answers)},
            {"lockbox_dns_timeouts_total",
             "Relayed queries given up after every upstream failed or stayed silent.",
             offsetof(struct dns_relay_counts, timeouts)},
            {"lockbox_dns_dropped_total",
             "DNS messages dropped unread: UDP under 12 or over 4096 bytes, TCP cut short.",
             offsetof(struct dns_relay_counts, dropped)},
        };
        for (size_t i = 0; i < ELEMENTSOF(plain); i++) {
                uint64_t v;
                memcpy(&v, (const char *)&c + plain[i].offset, sizeof(v));
                header(sb, plain[i].name, "counter", plain[i].help);
                strbuf_appendf(sb, "%s %llu\n", plain[i].name, (unsigned long long)v);
        }
        header(sb, "lockbox_dns_refused_total", "counter",
               "DNS queries to the relay not relayed, by reason (source: not a run; response, "
               "malformed, opcode, question: not a standard query; rate, share, evicted: over "
               "the run's share).");
        for (size_t i = 0; i < DNS_REFUSALS; i++)
                strbuf_appendf(sb, "lockbox_dns_refused_total{reason=\"%s\"} %llu\n",
                               dns_relay_refusal_names[i], (unsigned long long)c.refused[i]);
}

static void render_memory(struct strbuf *sb)
{
        static const char *const names[STATS_PROCS] = {"http", "jailer", "zygote"};
        header(sb, "lockbox_process_resident_memory_bytes", "gauge",
               "Resident memory of lockboxd's own processes (not of runs), measured by the "
               "jailer each second.");
        for (size_t i = 0; m.shared && i < STATS_PROCS; i++) {
                long long rss = atomic_load(&m.shared->rss[i]);
                if (rss > 0)
                        strbuf_appendf(sb,
                                       "lockbox_process_resident_memory_bytes{process=\"%s\"} "
                                       "%lld\n",
                                       names[i], rss);
        }
}

/* ---- shell jobs (the jailer's figures, src/shell/stats.c) ---------------- */

static void render_shell_jobs(struct strbuf *sb, struct shell_figures *f)
{
        static const uint32_t live[] = {SHELL_STARTING, SHELL_RUNNING};
        static const uint32_t ended[] = {SHELL_EXITED, SHELL_TERMINATED, SHELL_FAILED, SHELL_LOST};
        header(sb, "lockbox_shell_jobs", "gauge", "Shell jobs alive now, by status.");
        for (size_t i = 0; i < ELEMENTSOF(live); i++)
                strbuf_appendf(sb, "lockbox_shell_jobs{status=\"%s\"} %u\n",
                               shell_status_name(live[i]), atomic_load(&f->live[live[i]]));
        header(sb, "lockbox_shell_jobs_ended_total", "counter",
               "Shell jobs that ended, by final status.");
        for (size_t i = 0; i < ELEMENTSOF(ended); i++)
                strbuf_appendf(sb, "lockbox_shell_jobs_ended_total{status=\"%s\"} %lu\n",
                               shell_status_name(ended[i]), get(&f->ended[ended[i]]));
        header(sb, "lockbox_shell_job_duration_seconds", "histogram",
               "Shell jobs' time from start to end.");
        unsigned long cum = 0;
        for (size_t b = 0; b <= STATS_SHELL_BUCKETS; b++) {
                cum += get(&f->duration[b]);
                if (b < STATS_SHELL_BUCKETS)
                        strbuf_appendf(sb,
                                       "lockbox_shell_job_duration_seconds_bucket{le=\"%g\"} %lu\n",
                                       (double)stats_shell_bucket_ms[b] / 1e3, cum);
                else
                        strbuf_appendf(
                            sb, "lockbox_shell_job_duration_seconds_bucket{le=\"+Inf\"} %lu\n",
                            cum);
        }
        strbuf_appendf(sb, "lockbox_shell_job_duration_seconds_sum %.3f\n",
                       (double)get(&f->duration_sum_ms) / 1e3);
        strbuf_appendf(sb, "lockbox_shell_job_duration_seconds_count %lu\n",
                       get(&f->duration_count));
        header(sb, "lockbox_shell_output_bytes_total", "counter",
               "Bytes of output.log that ended shell jobs wrote.");
        strbuf_appendf(sb, "lockbox_shell_output_bytes_total %lu\n", get(&f->output_bytes));
        header(sb, "lockbox_shell_job_starts_total", "counter",
               "Shell jobs started, cold or from their binding's spare.");
        strbuf_appendf(sb, "lockbox_shell_job_starts_total{start=\"cold\"} %lu\n",
                       get(&f->starts[0]));
        strbuf_appendf(sb, "lockbox_shell_job_starts_total{start=\"spare\"} %lu\n",
                       get(&f->starts[1]));
}

static void render_shell(struct strbuf *sb)
{
        static const char *const limits[STATS_SHELL_LIMITS] = {
            [STATS_SHELL_MEMORY] = "memory",
            [STATS_SHELL_JOB_TIMEOUT] = "job_timeout",
            [STATS_SHELL_OUTPUT] = "output",
            [STATS_SHELL_SYSCALL] = "syscall",
            [STATS_SHELL_TOO_MANY_JOBS] = "too_many_jobs",
            [STATS_SHELL_DISK] = "disk",
        };
        static const char *const routes[STATS_SHELL_SNAPSHOTS] = {"save", "restore"};
        struct shell_figures *f = m.shared ? (struct shell_figures *)&m.shared->shell : NULL;
        if (!f || !atomic_load(&f->enabled))
                return;
        render_shell_jobs(sb, f);
        header(sb, "lockbox_shell_limits_total", "counter",
               "Limits shell jobs met, by limit (memory: processes killed by shell.memory; "
               "too_many_jobs: runs refused; disk: jobs that ended with their HOME or "
               "workspace at its bound).");
        for (size_t i = 0; i < STATS_SHELL_LIMITS; i++)
                strbuf_appendf(sb, "lockbox_shell_limits_total{limit=\"%s\"} %lu\n", limits[i],
                               get(&f->limits[i]));
        header(sb, "lockbox_shell_snapshots_total", "counter",
               "Snapshot calls of shell.home, by route and result.");
        for (size_t r = 0; r < STATS_SHELL_SNAPSHOTS; r++)
                for (int ok = 1; ok >= 0; ok--)
                        strbuf_appendf(sb,
                                       "lockbox_shell_snapshots_total{route=\"%s\",result=\"%s\"} "
                                       "%lu\n",
                                       routes[r], ok ? "ok" : "failed", get(&f->snapshots[r][ok]));
        header(sb, "lockbox_shell_home_free_bytes", "gauge",
               "Free bytes on shell.home's file system (checked each second).");
        strbuf_appendf(sb, "lockbox_shell_home_free_bytes %lld\n",
                       (long long)atomic_load(&f->home_free_bytes));
}

static void render_deps(struct strbuf *sb)
{
        char path[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/status.json",
                             m.layer_dir ? m.layer_dir : "") >= sizeof(path))
                return;
        json_t *st = json_load_file(path, 0, NULL);
        if (!st)
                return;
        const char *status = json_string_value(json_object_get(st, "status"));
        header(sb, "lockbox_dependencies_installed", "gauge",
               "Python packages in the current dependency layer.");
        strbuf_appendf(sb, "lockbox_dependencies_installed %zu\n",
                       json_array_size(json_object_get(st, "dependencies")));
        header(sb, "lockbox_dependencies_last_install_ok", "gauge",
               "1 when the last dependency install succeeded, 0 when it failed or none ran.");
        strbuf_appendf(sb, "lockbox_dependencies_last_install_ok %d\n",
                       status && strcmp(status, "ok") == 0);
        json_decref(st);
}

char *metrics_render(int in_flight)
{
        struct strbuf sb;
        strbuf_init(&sb, 4 << 20);
        header(&sb, "lockbox_build_info", "gauge", "lockboxd's version.");
        strbuf_appendf(&sb, "lockbox_build_info{version=\"%s\"} 1\n", LOCKBOX_VERSION);
        render_requests(&sb);
        render_runs(&sb, in_flight);
        render_syscalls(&sb);
        render_pools(&sb);
        render_deps(&sb);
        render_dns(&sb);
        render_shell(&sb);
        render_memory(&sb);
        size_t len;
        char *text = strbuf_steal(&sb, &len);
        if (!text)
                text = strdup("");
        return text;
}
