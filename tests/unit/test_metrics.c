/* Unit tests for http/metrics.c rendering: every line is a comment or a
 * sample of a family announced by its # TYPE; request counters by route
 * and code; run outcomes, warm runs; histograms cumulative with
 * inclusive bounds, sum and count; denied syscalls with safe label values
 * and an "other" past the table; gauges from the jailer's shared page;
 * the dependency layer's status.json; in-flight and queued runs. Each case
 * is a fresh process, so the counters start at zero. */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http/metrics.h"
#include "ipc/proto.h"
#include "ipc/stats.h"
#include "net/egress.h"
#include "test.h"

/* The value of the sample whose name and labels are exactly `series`
 * ("name{a=\"b\"}"), or -1 when there is none. */
static double sample(const char *text, const char *series)
{
        size_t n = strlen(series);
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, series, n) == 0 && l[n] == ' ')
                        return strtod(l + n + 1, NULL);
        return -1;
}

static bool name_char(char c, bool first)
{
        return isalpha((unsigned char)c) || c == '_' || c == ':' ||
               (!first && isdigit((unsigned char)c));
}

/* Checks one text exposition line by line: "# HELP name text", "# TYPE
 * name type" before any sample of name, samples "name[{labels}] number". */
static void check_exposition(const char *text)
{
        char typed[64][80];
        size_t n_typed = 0;
        EXPECT_TRUE(*text && text[strlen(text) - 1] == '\n');
        for (const char *l = text; *l;) {
                const char *end = strchr(l, '\n');
                char line[512];
                snprintf(line, sizeof(line), "%.*s", (int)(end - l), l);
                l = end + 1;
                char name[80], kind[32];
                if (strncmp(line, "# HELP ", 7) == 0)
                        continue;
                if (sscanf(line, "# TYPE %79s %31s", name, kind) == 2) {
                        EXPECT_TRUE(strcmp(kind, "counter") == 0 || strcmp(kind, "gauge") == 0 ||
                                    strcmp(kind, "histogram") == 0);
                        EXPECT_UINT_OP(n_typed, <, 64);
                        snprintf(typed[n_typed++], sizeof(typed[0]), "%s", name);
                        continue;
                }
                size_t k = 0;
                while (name_char(line[k], k == 0))
                        k++;
                if (k == 0 || (line[k] != ' ' && line[k] != '{')) {
                        test_fail(__FILE__, __LINE__, "not a sample: %s", line);
                        return;
                }
                bool known = false;
                for (size_t i = 0; i < n_typed && !known; i++) {
                        size_t t = strlen(typed[i]);
                        /* a histogram's samples are name_bucket, _sum, _count */
                        known = strncmp(line, typed[i], t) == 0 &&
                                (t == k || strncmp(line + t, "_bucket", 7) == 0 ||
                                 strncmp(line + t, "_sum", 4) == 0 ||
                                 strncmp(line + t, "_count", 6) == 0);
                }
                if (!known) {
                        test_fail(__FILE__, __LINE__, "sample before its # TYPE: %s", line);
                        return;
                }
                const char *v = strrchr(line, ' ');
                char *vend;
                strtod(v + 1, &vend);
                if (vend == v + 1 || *vend) {
                        test_fail(__FILE__, __LINE__, "no number at the end: %s", line);
                        return;
                }
        }
}

TEST(metrics_render_fresh_is_well_formed)
{
        metrics_init(NULL, NULL);
        char *t = metrics_render(0);
        EXPECT_NOT_NULL(t);
        check_exposition(t);
        EXPECT_STR_CONTAINS(t, "lockbox_build_info{version=\"");
        EXPECT_TRUE(sample(t, "lockbox_runs_total{language=\"python3\",outcome=\"ok\"}") == 0);
        EXPECT_TRUE(sample(t, "lockbox_runs_total{language=\"nodejs\",outcome=\"error\"}") == 0);
        EXPECT_TRUE(sample(t, "lockbox_runs_in_flight") == 0);
        /* no shared page: no pool gauges; no layer: no dependency gauges */
        EXPECT_STR_NOT_CONTAINS(t, "lockbox_pool_armed");
        EXPECT_STR_NOT_CONTAINS(t, "lockbox_dependencies_installed");
        /* memory figures come from the jailer's page only */
        EXPECT_STR_NOT_CONTAINS(t, "lockbox_process_resident_memory_bytes{");
        free(t);
}

TEST(metrics_requests_by_route_and_code)
{
        metrics_init(NULL, NULL);
        metrics_request("/health", 200);
        metrics_request("/health", 200);
        metrics_request("/v1/sandbox/run", 401);
        metrics_request("/nope", 404);
        metrics_request(NULL, 413);
        metrics_request("/health", 99);  /* out of range: not counted */
        metrics_request("/health", 600); /* out of range: not counted */
        metrics_refused_run_connection();
        char *t = metrics_render(0);
        check_exposition(t);
        EXPECT_TRUE(sample(t, "lockbox_http_requests_total{route=\"/health\",code=\"200\"}") == 2);
        EXPECT_TRUE(
            sample(t, "lockbox_http_requests_total{route=\"/v1/sandbox/run\",code=\"401\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_http_requests_total{route=\"other\",code=\"404\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_http_requests_total{route=\"other\",code=\"413\"}") == 1);
        EXPECT_STR_NOT_CONTAINS(t, "code=\"99\"");
        EXPECT_STR_NOT_CONTAINS(t, "code=\"600\"");
        /* zero counts are left out */
        EXPECT_STR_NOT_CONTAINS(t, "route=\"/metrics\"");
        EXPECT_TRUE(sample(t, "lockbox_http_refused_run_connections_total") == 1);
        free(t);
}

TEST(metrics_outcome_of_status_names)
{
        EXPECT_INT_EQ(metrics_outcome_of("ok"), OUTCOME_OK);
        EXPECT_INT_EQ(metrics_outcome_of("runtime_error"), OUTCOME_RUNTIME_ERROR);
        EXPECT_INT_EQ(metrics_outcome_of("timeout"), OUTCOME_TIMEOUT);
        EXPECT_INT_EQ(metrics_outcome_of("syscall_denied"), OUTCOME_SYSCALL_DENIED);
        EXPECT_INT_EQ(metrics_outcome_of("memory_limit"), OUTCOME_MEMORY_LIMIT);
        EXPECT_INT_EQ(metrics_outcome_of("output_limit"), OUTCOME_OUTPUT_LIMIT);
        EXPECT_INT_EQ(metrics_outcome_of(NULL), OUTCOME_ERROR);
        EXPECT_INT_EQ(metrics_outcome_of("bogus"), OUTCOME_ERROR);
        EXPECT_INT_EQ(metrics_outcome_of("error"), OUTCOME_ERROR);
}

TEST(metrics_runs_by_language_outcome_and_warm)
{
        metrics_init(NULL, NULL);
        metrics_run(LANG_PYTHON3, "ok", NULL, true, 10, 2000);
        metrics_run(LANG_PYTHON3, "ok", NULL, false, 10, 2000);
        metrics_run(LANG_PYTHON3, "timeout", NULL, false, 10, 2000);
        metrics_run(LANG_NODEJS, NULL, NULL, false, 10, 2000);
        metrics_run(0, "ok", NULL, true, 10, 10);  /* no such language: ignored */
        metrics_run(99, "ok", NULL, true, 10, 10); /* no such language: ignored */
        char *t = metrics_render(0);
        check_exposition(t);
        EXPECT_TRUE(sample(t, "lockbox_runs_total{language=\"python3\",outcome=\"ok\"}") == 2);
        EXPECT_TRUE(sample(t, "lockbox_runs_total{language=\"python3\",outcome=\"timeout\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_runs_total{language=\"nodejs\",outcome=\"error\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_runs_total{language=\"nodejs\",outcome=\"ok\"}") == 0);
        EXPECT_TRUE(sample(t, "lockbox_warm_runs_total{language=\"python3\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_warm_runs_total{language=\"nodejs\"}") == 0);
        /* a run without a verdict has a queue time but no run time */
        EXPECT_TRUE(sample(t, "lockbox_run_queue_seconds_count{language=\"nodejs\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_run_duration_seconds_count{language=\"nodejs\"}") == 0);
        EXPECT_TRUE(sample(t, "lockbox_run_duration_seconds_count{language=\"python3\"}") == 3);
        free(t);
}

/* Bounds are inclusive (le), buckets cumulative, +Inf equals the count,
 * the sum is in seconds. */
TEST(metrics_histogram_buckets_sum_and_count)
{
        metrics_init(NULL, NULL);
        metrics_run(LANG_PYTHON3, "ok", NULL, false, 0, 1000);      /* exactly 1 ms */
        metrics_run(LANG_PYTHON3, "ok", NULL, false, 0, 1001);      /* just above */
        metrics_run(LANG_PYTHON3, "ok", NULL, false, 0, 60000000);  /* the top bound */
        metrics_run(LANG_PYTHON3, "ok", NULL, false, 0, 120000000); /* above every bound */
        char *t = metrics_render(0);
        check_exposition(t);
        const char *b = "lockbox_run_duration_seconds_bucket{language=\"python3\",le=";
        char s[160];
        snprintf(s, sizeof(s), "%s\"0.001\"}", b);
        EXPECT_TRUE(sample(t, s) == 1);
        snprintf(s, sizeof(s), "%s\"0.0025\"}", b);
        EXPECT_TRUE(sample(t, s) == 2);
        snprintf(s, sizeof(s), "%s\"30\"}", b);
        EXPECT_TRUE(sample(t, s) == 2);
        snprintf(s, sizeof(s), "%s\"60\"}", b);
        EXPECT_TRUE(sample(t, s) == 3);
        snprintf(s, sizeof(s), "%s\"+Inf\"}", b);
        EXPECT_TRUE(sample(t, s) == 4);
        EXPECT_TRUE(sample(t, "lockbox_run_duration_seconds_count{language=\"python3\"}") == 4);
        EXPECT_TRUE(sample(t, "lockbox_run_duration_seconds_sum{language=\"python3\"}") ==
                    180.002001);
        /* the buckets never go down */
        double last = -1;
        for (const char *l = strstr(t, b); l && strncmp(l, b, strlen(b)) == 0;
             l = strchr(l, '\n') + 1) {
                const char *sp = memchr(l, ' ', strcspn(l, "\n"));
                EXPECT_NOT_NULL(sp);
                double v = strtod(sp + 1, NULL);
                EXPECT_TRUE(v >= last);
                last = v;
        }
        EXPECT_TRUE(last == 4);
        free(t);
}

TEST(metrics_denied_syscalls_labels_and_overflow)
{
        metrics_init(NULL, NULL);
        metrics_run(LANG_PYTHON3, "syscall_denied", "ptrace", false, 0, 1);
        metrics_run(LANG_PYTHON3, "syscall_denied", "ptrace", false, 0, 1);
        metrics_run(LANG_PYTHON3, "syscall_denied", "bad\"name}\n", false, 0, 1);
        metrics_run(LANG_PYTHON3, "ok", "mount", false, 0, 1); /* not a denial */
        metrics_run(LANG_PYTHON3, "syscall_denied", "", false, 0, 1);
        char *t = metrics_render(0);
        check_exposition(t);
        EXPECT_TRUE(sample(t, "lockbox_denied_syscalls_total{syscall=\"ptrace\"}") == 2);
        EXPECT_TRUE(sample(t, "lockbox_denied_syscalls_total{syscall=\"bad_name__\"}") == 1);
        EXPECT_STR_NOT_CONTAINS(t, "syscall=\"mount\"");
        EXPECT_STR_NOT_CONTAINS(t, "syscall=\"\"");
        free(t);
        /* 64 names have a line each; later new names count as "other" */
        for (int i = 0; i < 70; i++) {
                char name[16];
                snprintf(name, sizeof(name), "call%d", i);
                metrics_run(LANG_NODEJS, "syscall_denied", name, false, 0, 1);
        }
        metrics_run(LANG_NODEJS, "syscall_denied", "ptrace", false, 0, 1);
        t = metrics_render(0);
        check_exposition(t);
        EXPECT_TRUE(sample(t, "lockbox_denied_syscalls_total{syscall=\"ptrace\"}") == 3);
        EXPECT_TRUE(sample(t, "lockbox_denied_syscalls_total{syscall=\"call61\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_denied_syscalls_total{syscall=\"call62\"}") == -1);
        EXPECT_TRUE(sample(t, "lockbox_denied_syscalls_total{syscall=\"other\"}") == 8);
        free(t);
}

TEST(metrics_pool_gauges_from_the_shared_page)
{
        int fd = -1;
        struct shared_stats *s = stats_create(&fd);
        EXPECT_NOT_NULL(s);
        close(fd);
        atomic_store(&s->armed[LANG_PYTHON3][0], 4);
        atomic_store(&s->armed[LANG_PYTHON3][1], 2);
        atomic_store(&s->spawning[LANG_NODEJS][1], 1);
        atomic_store(&s->pool_target[LANG_PYTHON3], 4);
        atomic_store(&s->runtime[LANG_PYTHON3], 1);
        atomic_store(&s->spawn_failures, 5);
        atomic_store(&s->net_refused[0], 9);
        atomic_store(&s->rss[STATS_PROC_JAILER], 12345678);
        atomic_store(&s->rss[STATS_PROC_ZYGOTE], 7654321);
        metrics_init(s, NULL);
        char *t = metrics_render(0);
        check_exposition(t);
        EXPECT_TRUE(sample(t, "lockbox_pool_armed{language=\"python3\",network=\"false\"}") == 4);
        EXPECT_TRUE(sample(t, "lockbox_pool_armed{language=\"python3\",network=\"true\"}") == 2);
        EXPECT_TRUE(sample(t, "lockbox_pool_armed{language=\"nodejs\",network=\"false\"}") == 0);
        EXPECT_TRUE(sample(t, "lockbox_pool_starting{language=\"nodejs\",network=\"true\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_pool_target{language=\"python3\"}") == 4);
        EXPECT_TRUE(sample(t, "lockbox_runtime_available{language=\"python3\"}") == 1);
        EXPECT_TRUE(sample(t, "lockbox_runtime_available{language=\"nodejs\"}") == 0);
        EXPECT_TRUE(sample(t, "lockbox_spawn_failures_total") == 5);
        char s0[128];
        snprintf(s0, sizeof(s0), "lockbox_network_refused_total{reason=\"%s\"}",
                 egress_reason_names[0]);
        EXPECT_TRUE(sample(t, s0) == 9);
        for (size_t i = 1; i < EGRESS_REASONS; i++) {
                snprintf(s0, sizeof(s0), "lockbox_network_refused_total{reason=\"%s\"}",
                         egress_reason_names[i]);
                EXPECT_TRUE(sample(t, s0) == 0);
        }
        EXPECT_TRUE(sample(t, "lockbox_process_resident_memory_bytes{process=\"jailer\"}") ==
                    12345678);
        EXPECT_TRUE(sample(t, "lockbox_process_resident_memory_bytes{process=\"zygote\"}") ==
                    7654321);
        EXPECT_STR_NOT_CONTAINS(t, "process=\"http\""); /* 0: not measured yet */
        free(t);
        stats_unmap(s);
}

/* The shared page is zeroed; what the jailer writes, a reader that
 * attached through the memfd sees; the reader can neither map it
 * writable nor write(2) to it. */
TEST(metrics_shared_page_is_read_only_for_readers)
{
        int fd = -1;
        struct shared_stats *s = stats_create(&fd);
        EXPECT_NOT_NULL(s);
        EXPECT_UINT_EQ(atomic_load(&s->spawn_failures), 0);
        EXPECT_INT_EQ(atomic_load(&s->zygote_pid), 0);
        const struct shared_stats *r = stats_attach(fd);
        EXPECT_NOT_NULL(r);
        atomic_store(&s->armed[LANG_NODEJS][0], 3);
        EXPECT_UINT_EQ(atomic_load(&r->armed[LANG_NODEJS][0]), 3);
        EXPECT_TRUE(mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
                    MAP_FAILED);
        EXPECT_ERRNO(-errno, -EPERM);
        char zero[8] = {0};
        EXPECT_INT_EQ(pwrite(fd, zero, sizeof(zero), 0), -1);
        EXPECT_ERRNO(-errno, -EPERM);
        EXPECT_UINT_EQ(atomic_load(&r->armed[LANG_NODEJS][0]), 3);
        stats_unmap(r);
        stats_unmap(s);
        stats_unmap(NULL);
        close(fd);
}

TEST(metrics_dependency_layer_status)
{
        char dir[] = "/tmp/lockbox-unit-metrics-XXXXXX";
        EXPECT_NOT_NULL(mkdtemp(dir));
        char path[128];
        snprintf(path, sizeof(path), "%s/status.json", dir);
        FILE *f = fopen(path, "w");
        EXPECT_NOT_NULL(f);
        fputs("{\"status\":\"ok\",\"dependencies\":[{\"name\":\"a\"},{\"name\":\"b\"}]}", f);
        fclose(f);
        metrics_init(NULL, dir);
        char *t = metrics_render(0);
        check_exposition(t);
        EXPECT_TRUE(sample(t, "lockbox_dependencies_installed") == 2);
        EXPECT_TRUE(sample(t, "lockbox_dependencies_last_install_ok") == 1);
        free(t);
        f = fopen(path, "w");
        fputs("{\"status\":\"failed\"}", f);
        fclose(f);
        t = metrics_render(0);
        EXPECT_TRUE(sample(t, "lockbox_dependencies_installed") == 0);
        EXPECT_TRUE(sample(t, "lockbox_dependencies_last_install_ok") == 0);
        free(t);
        f = fopen(path, "w");
        fputs("{not json", f);
        fclose(f);
        t = metrics_render(0);
        check_exposition(t);
        EXPECT_STR_NOT_CONTAINS(t, "lockbox_dependencies_");
        free(t);
        unlink(path);
        rmdir(dir);
}

TEST(metrics_in_flight_excludes_queued_runs)
{
        metrics_init(NULL, NULL);
        metrics_queued(+3);
        metrics_queued(-1);
        char *t = metrics_render(5);
        EXPECT_TRUE(sample(t, "lockbox_runs_queued") == 2);
        EXPECT_TRUE(sample(t, "lockbox_runs_in_flight") == 3);
        free(t);
        /* never below zero when the counts cross */
        t = metrics_render(1);
        EXPECT_TRUE(sample(t, "lockbox_runs_in_flight") == 0);
        free(t);
}
