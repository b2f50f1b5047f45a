/* Unit tests that keep the docs true where they state a fact the code
 * defines (as test_config.c keeps docs/CONFIG.md in step with the config
 * table): the metrics docs/API.md lists against what /metrics renders
 * (names, types, enumerated label values, histogram buckets), the
 * capabilities of DEPLOY.md, ARCHITECTURE.md and the deployment files
 * against the ones lockboxd checks, the HTTP limits (headers, connection
 * memory, a small body), the jailer's deadlines and backoffs, and the
 * syscalls ARCHITECTURE.md names against the policy table and the
 * configuration's never list. Each fails naming the
 * file and what differs; run from the repository root (make unit). */
#include <ctype.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "config/config.h"
#include "config/schema.h"
#include "daemon/daemon.h"
#include "http/metrics.h"
#include "http/server.h"
#include "ipc/proto.h"
#include "ipc/stats.h"
#include "jail/policy.h"
#include "jailer/internal.h"
#include "net/dnsrelay.h"
#include "test.h"

/* ---- reading the docs ------------------------------------------------- */

/* path's text with every run of white space (line breaks included) made
 * one space, so a phrase is found however the paragraph is wrapped;
 * malloc'd, or NULL (and the case failed). */
static char *doc_read(const char *path)
{
        struct strbuf sb;
        if (file_read(path, 0, 1 << 20, &sb) < 0 || !sb.data) {
                test_fail(__FILE__, __LINE__, "cannot read %s (run from the repository root)",
                          path);
                return NULL;
        }
        char *out = sb.data;
        size_t k = 0;
        for (size_t i = 0; i < sb.len; i++) {
                bool space = isspace((unsigned char)sb.data[i]);
                if (!space || (k > 0 && out[k - 1] != ' '))
                        out[k++] = space ? ' ' : sb.data[i];
        }
        out[k] = '\0';
        return out;
}

/* The document says the phrase (printf-style); a failure names both. */
__attribute__((format(printf, 3, 4))) static bool doc_says(const char *text, const char *path,
                                                           const char *fmt, ...)
{
        char phrase[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(phrase, sizeof(phrase), fmt, ap);
        va_end(ap);
        if (text && strstr(text, phrase))
                return true;
        test_fail(__FILE__, __LINE__, "%s does not say \"%s\" (the code's figure)", path, phrase);
        return false;
}

/* The names in backticks between from (inclusive) and to (exclusive, or
 * the end), one per call: the next one after *at, copied into name. */
static bool next_quoted(const char **at, const char *to, char *name, size_t size)
{
        const char *a = strchr(*at, '`');
        const char *b = a ? strchr(a + 1, '`') : NULL;
        if (!b || (to && b >= to))
                return false;
        snprintf(name, size, "%.*s", (int)(b - a - 1), a + 1);
        *at = b + 1;
        return true;
}

/* A small list of names. */
struct names {
        char v[64][64];
        size_t n;
};

static void names_add(struct names *s, const char *name)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i], name) == 0)
                        return;
        if (s->n < 64)
                snprintf(s->v[s->n++], sizeof(s->v[0]), "%s", name);
}

static bool names_have(const struct names *s, const char *name)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i], name) == 0)
                        return true;
        return false;
}

/* Both lists hold the same names; what differs is named. */
static void expect_same(const struct names *doc, const struct names *code, const char *what)
{
        for (size_t i = 0; i < doc->n; i++)
                if (!names_have(code, doc->v[i]))
                        test_fail(__FILE__, __LINE__, "%s: %s is in the doc, not in the code", what,
                                  doc->v[i]);
        for (size_t i = 0; i < code->n; i++)
                if (!names_have(doc, code->v[i]))
                        test_fail(__FILE__, __LINE__, "%s: %s is in the code, not in the doc", what,
                                  code->v[i]);
}

/* ---- /metrics (docs/API.md) ------------------------------------------- */

/* A DNS relay on a loopback socket of the kernel's choosing, asked
 * nothing: its counters are what /metrics shows of it. */
static struct dns_relay *idle_relay(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct sockaddr_storage up = {0};
        memcpy(&up, &a, sizeof(a));
        ((struct sockaddr_in *)&up)->sin_port = htons(53);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct dns_relay_config c = {.udp_fd = fd,
                                     .tcp_fd = -1,
                                     .upstreams = &up,
                                     .n_upstreams = 1,
                                     .timeout_ms = 100,
                                     .max_inflight = 1,
                                     .max_tcp = 1,
                                     .runs = {0x7f000000, 8},
                                     .source_rate = 1,
                                     .source_burst = 1,
                                     .source_inflight = 1,
                                     .source_tcp = 1};
        struct dns_relay *r = NULL;
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            dns_relay_start(&c, &r) < 0) {
                safe_close(fd);
                return NULL;
        }
        return r;
}

/* Every family /metrics can show: a shared page with figures in it (shell
 * jobs' among them), a dependency layer, every process's memory, the DNS relay. malloc'd. */
static char *render_everything(char *dir)
{
        int fd = -1;
        struct shared_stats *s = stats_create(&fd);
        if (!s || !mkdtemp(dir))
                return NULL;
        close(fd);
        for (size_t p = 0; p < STATS_PROCS; p++)
                atomic_store(&s->rss[p], 4096);
        atomic_store(&s->shell.enabled, 1);
        char path[128];
        snprintf(path, sizeof(path), "%s/status.json", dir);
        FILE *f = fopen(path, "w");
        if (!f)
                return NULL;
        fputs("{\"status\":\"ok\",\"dependencies\":[]}", f);
        fclose(f);
        metrics_init(s, dir);
        metrics_run(LANG_PYTHON3, "syscall_denied", "ptrace", false, 1000, 1000);
        struct dns_relay *relay = idle_relay();
        if (!relay)
                return NULL;
        metrics_set_dns_relay(relay);
        char *t = metrics_render(0);
        metrics_set_dns_relay(NULL);
        dns_relay_stop(relay);
        unlink(path);
        rmdir(dir);
        return t;
}

/* The families in text's "# TYPE name type" lines, as "name type". */
static void rendered_families(const char *text, struct names *ret)
{
        for (const char *l = text; (l = strstr(l, "# TYPE ")); l++) {
                char name[64], kind[32];
                if (sscanf(l, "# TYPE %63s %31s", name, kind) == 2) {
                        char both[64];
                        snprintf(both, sizeof(both), "%.40s %.20s", name, kind);
                        names_add(ret, both);
                }
        }
}

/* The values label takes in text's samples of family. */
static void rendered_values(const char *text, const char *family, const char *label,
                            struct names *ret)
{
        char pre[96], key[80];
        snprintf(pre, sizeof(pre), "\n%.80s{", family);
        snprintf(key, sizeof(key), "%.60s=\"", label);
        for (const char *l = text; (l = strstr(l, pre)); l++) {
                const char *eol = strchr(l + 1, '\n');
                const char *v = strstr(l, key);
                if (!v || (eol && v > eol))
                        continue;
                v += strlen(key);
                char val[64];
                snprintf(val, sizeof(val), "%.*s", (int)strcspn(v, "\""), v);
                names_add(ret, val);
        }
}

/* The API.md table's section: from "### GET /metrics" to the next "## ". */
static const char *metrics_section(const char *api, const char **ret_end)
{
        const char *s = api ? strstr(api, "### GET /metrics") : NULL;
        *ret_end = s ? strstr(s, " ## ") : NULL;
        return s;
}

TEST(docs_api_metrics_table_matches_what_metrics_renders)
{
        char dir[] = "/tmp/lockbox-unit-docs-XXXXXX";
        char *text = render_everything(dir);
        EXPECT_NOT_NULL(text);
        _cleanup_free_ char *api = doc_read("docs/API.md");
        const char *end, *sec = metrics_section(api, &end);
        EXPECT_NOT_NULL(sec);
        struct names doc = {0}, code = {0};
        rendered_families(text, &code);
        /* Rows: "| `name`[, `name`] | type | labels | what |" */
        for (const char *row = sec; (row = strstr(row, "| `lockbox_")) && (!end || row < end);
             row++) {
                const char *cells[4];
                const char *c = row;
                for (size_t i = 0; i < 4 && c; i++)
                        cells[i] = c = strchr(c + 1, '|');
                if (!c)
                        break;
                char kind[32];
                snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(cells[0] + 2, " |"),
                         cells[0] + 2);
                const char *at = row;
                char name[64];
                while (next_quoted(&at, cells[0], name, sizeof(name))) {
                        char both[64];
                        snprintf(both, sizeof(both), "%.40s %.20s", name, kind);
                        names_add(&doc, both);
                        /* each label listed with its values: `label` (`a`, `b`) */
                        const char *l = cells[1];
                        char label[64];
                        while (next_quoted(&l, cells[2], label, sizeof(label))) {
                                if (strncmp(l, " (`", 3) != 0)
                                        continue;
                                struct names dv = {0}, cv = {0};
                                const char *close = strchr(l, ')');
                                char v[64];
                                while (next_quoted(&l, close, v, sizeof(v)))
                                        names_add(&dv, v);
                                rendered_values(text, name, label, &cv);
                                char what[160];
                                snprintf(what, sizeof(what), "docs/API.md %s's %s values", name,
                                         label);
                                expect_same(&dv, &cv, what);
                        }
                }
        }
        EXPECT_UINT_OP(doc.n, >, 10);
        expect_same(&doc, &code, "docs/API.md metrics (name and type)");
        free(text);
}

/* "Histogram buckets: 1, 2.5, ... 500 ms, 1, ... 60 s." against the le
 * bounds of a rendered histogram. */
TEST(docs_api_histogram_buckets_match_the_rendered_bounds)
{
        metrics_init(NULL, NULL);
        _cleanup_free_ char *text = metrics_render(0);
        _cleanup_free_ char *api = doc_read("docs/API.md");
        EXPECT_NOT_NULL(text);
        const char *s = api ? strstr(api, "Histogram buckets: ") : NULL;
        EXPECT_NOT_NULL(s);
        s += strlen("Histogram buckets: ");
        double doc[32], pending[32];
        size_t n_doc = 0, n_pending = 0;
        while (*s && *s != '.' && n_doc + n_pending < 32) {
                char *e;
                double v = strtod(s, &e);
                if (e != s) {
                        pending[n_pending++] = v;
                        s = e;
                        continue;
                }
                /* a unit ends a group: "ms" or "s" */
                double scale = strncmp(s, "ms", 2) == 0 ? 0.001 : strncmp(s, "s", 1) == 0 ? 1 : 0;
                for (size_t i = 0; scale > 0 && i < n_pending; i++)
                        doc[n_doc++] = pending[i] * scale;
                if (scale > 0)
                        n_pending = 0;
                s += scale == 0.001 ? 2 : 1;
        }
        EXPECT_SIZE_EQ(n_pending, 0);
        size_t n = 0;
        const char *key = "lockbox_run_duration_seconds_bucket{language=\"python3\",le=\"";
        for (const char *l = text; (l = strstr(l, key)); l++) {
                const char *v = l + strlen(key);
                if (*v == '+')
                        break;
                double got = strtod(v, NULL);
                if (n >= n_doc || got < doc[n] * 0.999 || got > doc[n] * 1.001) {
                        test_fail(__FILE__, __LINE__,
                                  "docs/API.md histogram bucket %zu: rendered %g, doc %g", n, got,
                                  n < n_doc ? doc[n] : -1.0);
                        return;
                }
                n++;
        }
        EXPECT_SIZE_EQ(n, n_doc);
}

/* ---- capabilities (daemon.c's needed_caps) ----------------------------- */

static const char *const number_words[] = {"zero", "one",   "two",   "three", "four", "five",
                                           "six",  "seven", "eight", "nine",  "ten"};

TEST(docs_deploy_capabilities_are_the_ones_lockboxd_checks)
{
        struct names code = {0};
        for (size_t i = 0; daemon_needed_cap(i); i++)
                names_add(&code, daemon_needed_cap(i));
        EXPECT_UINT_OP(code.n, <, ELEMENTSOF(number_words) - 1);
        _cleanup_free_ char *deploy = doc_read("docs/DEPLOY.md");
        /* The table: the checked ones first, in order, then the one runs
         * with network need (CAP_NET_ADMIN, not checked at start). */
        const char *t = deploy ? strstr(deploy, "### Capabilities") : NULL;
        EXPECT_NOT_NULL(t);
        const char *end = strstr(t, "Sometimes needed");
        struct names table = {0};
        char name[64];
        for (const char *row = t; (row = strstr(row, "| `CAP_")) && (!end || row < end); row++) {
                const char *at = row, *cell = strchr(row + 1, '|');
                while (next_quoted(&at, cell, name, sizeof(name)))
                        names_add(&table, name);
        }
        if (table.n != code.n + 1)
                test_fail(__FILE__, __LINE__,
                          "docs/DEPLOY.md's capability table names %zu, lockboxd checks %zu "
                          "(and CAP_NET_ADMIN is the one more)",
                          table.n, code.n);
        EXPECT_SIZE_EQ(table.n, code.n + 1);
        for (size_t i = 0; i < code.n; i++)
                EXPECT_STR_EQ(table.v[i], code.v[i]);
        EXPECT_STR_EQ(table.v[code.n], "CAP_NET_ADMIN");
        doc_says(deploy, "docs/DEPLOY.md", "that it holds the first %s,", number_words[code.n]);
        doc_says(deploy, "docs/DEPLOY.md", "without the %s it starts",
                 (const char *[]){"first", "second", "third", "fourth", "fifth", "sixth", "seventh",
                                  "eighth", "ninth", "tenth", "eleventh"}[code.n]);
        /* ARCHITECTURE.md names them where main checks them */
        _cleanup_free_ char *arch = doc_read("docs/ARCHITECTURE.md");
        const char *a = arch ? strstr(arch, "with the capabilities the jail needs (") : NULL;
        EXPECT_NOT_NULL(a);
        struct names listed = {0};
        for (const char *close = strchr(a, ')'); next_quoted(&a, close, name, sizeof(name));)
                names_add(&listed, name);
        expect_same(&listed, &code, "docs/ARCHITECTURE.md's capabilities");
}

/* Each span of text from `from` to the next `to`, in order: fn(span, len)
 * for every one; how many there were. */
static size_t each_span(const char *text, const char *from, const char *to,
                        void (*fn)(const char *what, const char *span, size_t len),
                        const char *what)
{
        size_t n = 0;
        for (const char *a = text; a && (a = strstr(a, from)); a += strlen(from), n++) {
                const char *b = strstr(a + strlen(from), to);
                fn(what, a, b ? (size_t)(b - a) : strlen(a));
        }
        return n;
}

/* The full set every way of starting the service must grant: what
 * lockboxd checks at start, and CAP_NET_ADMIN, which runs with network
 * need (Dify asks for network on every run). */
static struct names needed_caps;
static const char *cap_prefix; /* "--cap-add " and the like, before the bare name and a space */

static void span_grants_all(const char *what, const char *span, size_t len)
{
        for (size_t i = 0; i < needed_caps.n; i++) {
                char want[96];
                const char *bare = needed_caps.v[i] + strlen("CAP_");
                snprintf(want, sizeof(want), "%s%s ", cap_prefix, bare);
                if (!memmem(span, len, want, strlen(want)))
                        test_fail(__FILE__, __LINE__, "%s: a recipe lacks \"%s\": %.*s", what, want,
                                  (int)(len < 160 ? len : 160), span);
        }
}

static void recipes_grant_all(const char *path, const char *from, const char *to,
                              const char *prefix, size_t at_least)
{
        _cleanup_free_ char *text = doc_read(path);
        cap_prefix = prefix;
        size_t n = text ? each_span(text, from, to, span_grants_all, path) : 0;
        if (n < at_least)
                test_fail(__FILE__, __LINE__, "%s: %zu recipes (\"%s\"), expected at least %zu",
                          path, n, from, at_least);
}

/* Every recipe that starts the service (the README, DEPLOY.md, the
 * Dockerfile, the compose file, the Kubernetes manifests, the systemd
 * unit) grants every capability the image needs, CAP_NET_ADMIN included:
 * DEPLOY.md's docker run line once lacked it, and its daemon refused
 * every run with network. */
TEST(docs_every_recipe_grants_every_capability)
{
        needed_caps = (struct names){0};
        for (size_t i = 0; daemon_needed_cap(i); i++)
                names_add(&needed_caps, daemon_needed_cap(i));
        names_add(&needed_caps, "CAP_NET_ADMIN");
        recipes_grant_all("docs/DEPLOY.md", "docker run -d", "lockbox:", "--cap-add ", 1);
        recipes_grant_all("README.md", "docker run -d", "lockbox:", "--cap-add ", 0);
        recipes_grant_all("Dockerfile", "docker run -d", "lockbox:", "--cap-add ", 1);
        recipes_grant_all("deploy/docker-compose.yaml", "cap_add:", "security_opt:", "- ", 1);
        recipes_grant_all("deploy/kubernetes/20-deployment.yaml", "add:", "seccompProfile", "- ",
                          1);
        recipes_grant_all("deploy/kubernetes/shell/20-statefulset.yaml", "add:", "seccompProfile",
                          "- ", 1);
        recipes_grant_all("deploy/lockboxd.service", "CapabilityBoundingSet=", "NoNewPrivileges",
                          "CAP_", 1);
}

/* ---- HTTP limits (http/server.h) -------------------------------------- */

TEST(docs_state_the_http_limits_the_server_sets)
{
        _cleanup_free_ char *arch = doc_read("docs/ARCHITECTURE.md");
        _cleanup_free_ char *sec = doc_read("docs/SECURITY.md");
        _cleanup_free_ char *api = doc_read("docs/API.md");
        EXPECT_INT_EQ(HTTP_HEADERS_MAX % 1024, 0);
        EXPECT_INT_EQ(HTTP_CONNECTION_MEMORY % 1024, 0);
        EXPECT_INT_EQ(HTTP_BODY_SMALL_BYTES % 1024, 0);
        doc_says(arch, "docs/ARCHITECTURE.md", "Headers larger than %d KiB get HTTP 431",
                 HTTP_HEADERS_MAX / 1024);
        doc_says(sec, "docs/SECURITY.md", "refuses headers over %d KiB", HTTP_HEADERS_MAX / 1024);
        doc_says(sec, "docs/SECURITY.md", "at most %d KiB of headers and buffers per connection",
                 HTTP_CONNECTION_MEMORY / 1024);
        doc_says(api, "docs/API.md", "or %d bytes (dependency update)", HTTP_BODY_SMALL_BYTES);
        doc_says(arch, "docs/ARCHITECTURE.md", "%d KiB for a dependency update",
                 HTTP_BODY_SMALL_BYTES / 1024);
        doc_says(sec, "docs/SECURITY.md", "%d KiB for a dependency update",
                 HTTP_BODY_SMALL_BYTES / 1024);
        /* the shell-job API's caps and its stop */
        doc_says(api, "docs/API.md", "bodies may be %d bytes at most", HTTP_BODY_SMALL_BYTES);
        doc_says(api, "docs/API.md", "the body's cap, %d bytes", HTTP_BODY_TEXT_BYTES);
        doc_says(api, "docs/API.md", "still waiting for the jailer %d s after the signal",
                 HTTP_SHELL_STOP_GRACE_MS / 1000);
}

/* ---- syscalls ARCHITECTURE.md names (jail/policy.c, config/syscalls.c) -- */

/* Each plain name in backticks between the two phrases of
 * ARCHITECTURE.md's "Syscall policy" (names with a * stand for a family
 * and are left out); check(name) says whether the code agrees. */
static void expect_named_syscalls(const char *arch, const char *from, const char *to,
                                  bool (*check)(const char *), const char *what)
{
        const char *a = arch ? strstr(arch, from) : NULL;
        const char *end = a ? strstr(a, to) : NULL;
        if (!a || !end) {
                test_fail(__FILE__, __LINE__, "docs/ARCHITECTURE.md: no \"%s\" ... \"%s\"", from,
                          to);
                return;
        }
        char name[64];
        size_t n = 0;
        for (a += strlen(from); next_quoted(&a, end, name, sizeof(name));) {
                if (strchr(name, '*'))
                        continue;
                n++;
                if (!check(name))
                        test_fail(__FILE__, __LINE__,
                                  "docs/ARCHITECTURE.md says %s %s; the code "
                                  "does not",
                                  name, what);
        }
        if (n < 3)
                test_fail(__FILE__, __LINE__, "docs/ARCHITECTURE.md: too few names for %s", what);
}

static bool is_kill(const char *name)
{
        return policy_lookup(name) == POLICY_KILL;
}

static bool is_enosys(const char *name)
{
        return policy_lookup(name) == POLICY_ENOSYS;
}

static bool is_never_allowed(const char *name)
{
        for (size_t i = 0; config_never_allowed_syscalls[i]; i++)
                if (strcmp(config_never_allowed_syscalls[i], name) == 0)
                        return true;
        return false;
}

TEST(docs_architecture_syscalls_match_the_policy_tables)
{
        _cleanup_free_ char *arch = doc_read("docs/ARCHITECTURE.md");
        expect_named_syscalls(arch, "* `ENOSYS` by name:", "* kill and name", is_enosys,
                              "fail with ENOSYS by name");
        expect_named_syscalls(arch, "what dify-sandbox answered); for every language",
                              "* foreign architectures", is_kill, "end the run");
        expect_named_syscalls(arch, "The configuration refuses to add", "they would undo the jail",
                              is_never_allowed, "can never be added by allowed_syscalls");
}

/* ---- the jailer's deadlines and backoffs (jailer/internal.h) ---------- */

TEST(docs_architecture_states_the_jailers_deadlines_and_backoff)
{
        _cleanup_free_ char *arch = doc_read("docs/ARCHITECTURE.md");
        EXPECT_INT_EQ(BACKOFF_MAX_MS % 1000, 0);
        doc_says(arch, "docs/ARCHITECTURE.md", "Arm a start-up deadline (%d s,",
                 RUN_SPAWN_TIMEOUT_S);
        doc_says(arch, "docs/ARCHITECTURE.md",
                 "A failing refill backs off (%d ms doubling to %d s)", BACKOFF_FIRST_MS,
                 BACKOFF_MAX_MS / 1000);
        doc_says(arch, "docs/ARCHITECTURE.md", "one that dies starting is retried %d s later",
                 ZYGOTE_ROTATE_RETRY_S);
        /* and backoff_ms() does what that says */
        EXPECT_UINT_EQ(backoff_ms(1), BACKOFF_FIRST_MS);
        EXPECT_UINT_EQ(backoff_ms(2), 2 * BACKOFF_FIRST_MS);
        EXPECT_UINT_EQ(backoff_ms(3), 4 * BACKOFF_FIRST_MS);
        EXPECT_UINT_EQ(backoff_ms(1000), BACKOFF_MAX_MS);
}

/* ---- configuration sections and variables (config/schema.c) ---------- */

/* The reference's own sections: every other one is lockbox's. */
static bool reference_section(const char *name, size_t len)
{
        return (len == 3 && strncmp(name, "app", 3) == 0) ||
               (len == 5 && strncmp(name, "proxy", 5) == 0);
}

static void quoted_between(const char *text, const char *from, const char *to, struct names *ret)
{
        const char *a = text ? strstr(text, from) : NULL;
        const char *end = a ? strstr(a, to) : NULL;
        char name[64];
        if (!a || !end) {
                test_fail(__FILE__, __LINE__, "no \"%s\" ... \"%s\"", from, to);
                return;
        }
        while (next_quoted(&a, end, name, sizeof(name)))
                names_add(ret, name);
}

/* The README's and CONFIG.md's lists of lockbox's sections are the
 * schema's, and every key of those sections has the derived LOCKBOX_
 * variable CONFIG.md promises (server.log_format once had LOG_FORMAT),
 * or the SHELLCTL_ one Dify's shellctl reads. */
TEST(docs_config_sections_and_variables_are_the_schemas)
{
        struct names code = {0}, readme = {0}, config = {0};
        for (size_t i = 0; i < schema_n_rows; i++) {
                const struct schema_row *row = &schema_rows[i];
                size_t len = schema_section_len(row->name);
                if (len == 0 || reference_section(row->name, len))
                        continue;
                char section[64];
                snprintf(section, sizeof(section), "%.*s", (int)len, row->name);
                names_add(&code, section);
                char env[128], want[128];
                size_t k = (size_t)snprintf(want, sizeof(want), "LOCKBOX_");
                for (const char *p = row->name; *p && k + 1 < sizeof(want); p++)
                        want[k++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
                want[k] = '\0';
                EXPECT_INT_EQ(schema_env_name(row, env, sizeof(env)), 0);
                /* shell keys the reference shellctl reads keep its names */
                if (strcmp(env, want) != 0 && strncmp(env, "SHELLCTL_", 9) != 0)
                        test_fail(__FILE__, __LINE__, "%s: variable %s, CONFIG.md promises %s",
                                  row->name, env, want);
        }
        _cleanup_free_ char *rd = doc_read("README.md");
        _cleanup_free_ char *cf = doc_read("docs/CONFIG.md");
        quoted_between(rd, "New sections", "hold lockbox's own settings", &readme);
        quoted_between(cf, "lockbox's own settings live in the", "sections.", &config);
        expect_same(&readme, &code, "README.md's configuration sections");
        expect_same(&config, &code, "docs/CONFIG.md's configuration sections");
}

/* TESTING.md says what make test runs, in the Makefile's order. */
TEST(docs_testing_states_make_tests_order)
{
        _cleanup_free_ char *mk = doc_read("Makefile");
        _cleanup_free_ char *doc = doc_read("docs/TESTING.md");
        const char *t = mk ? strstr(mk, " test: ") : NULL;
        EXPECT_NOT_NULL(t);
        if (!t)
                return;
        t += strlen(" test: ");
        const char *end = strchr(t, '#');
        struct strbuf want;
        strbuf_init(&want, 0);
        strbuf_appends(&want, "`make test` | ");
        /* the prerequisites, as `a`, `b`, ... */
        for (const char *p = t; p < end;) {
                size_t n = strcspn(p, " ");
                if (n == 0) {
                        p++;
                        continue;
                }
                if (p + n > end)
                        n = (size_t)(end - p);
                strbuf_appendf(&want, "%s`%.*s`", want.len > strlen("`make test` | ") ? ", " : "",
                               (int)n, p);
                p += n;
        }
        doc_says(doc, "docs/TESTING.md", "%s", want.data);
        strbuf_free(&want);
}

/* ---- the repository stands on its own -------------------------------- */

/* Phrases that point outside the repository (the design documents it
 * was built from are not part of a clone), split so this file does not
 * hold them whole. */
static const char *const outside[][2] = {{"../", "shared"}, {"SPEC ", "section"}};
static size_t n_outside_hits;

static int scan_for_outside(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        if (type == FTW_D &&
            (strcmp(path + ftw->base, "build") == 0 || strcmp(path + ftw->base, ".git") == 0 ||
             strcmp(path + ftw->base, "corpus") == 0))
                return FTW_SKIP_SUBTREE;
        if (type != FTW_F || st->st_size > (1 << 20))
                return FTW_CONTINUE;
        _cleanup_free_ char *text = doc_read(path);
        for (size_t i = 0; text && i < ELEMENTSOF(outside); i++) {
                char phrase[64];
                snprintf(phrase, sizeof(phrase), "%s%s", outside[i][0], outside[i][1]);
                if (strstr(text, phrase)) {
                        test_fail(__FILE__, __LINE__, "%s cites \"%s\", which a clone lacks", path,
                                  phrase);
                        n_outside_hits++;
                }
        }
        return FTW_CONTINUE;
}

TEST(docs_repository_cites_nothing_outside_it)
{
        static const char *const roots[] = {"src",      "tests",     "docs", "bench",
                                            "scripts",  "deploy",    "conf", "README.md",
                                            "Makefile", "Dockerfile"};
        n_outside_hits = 0;
        for (size_t i = 0; i < ELEMENTSOF(roots); i++)
                EXPECT_INT_EQ(nftw(roots[i], scan_for_outside, 16, FTW_PHYS | FTW_ACTIONRETVAL), 0);
        EXPECT_SIZE_EQ(n_outside_hits, 0);
}
