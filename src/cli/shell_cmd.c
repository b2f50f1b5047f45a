/* The `lockbox shell` commands (see shell.h): each is one or a few calls
 * of the shell-job API. Output is followed by offsets, as Dify's client
 * does: wait calls from the last offset until the job is done and nothing
 * is left after the window. An error answer becomes "lockbox: CODE:
 * MESSAGE" (the API's words) and exit 3. */
#include "cli/shell.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/file.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "ipc/shell_proto.h"

/* While following: each wait call's longest wait, its window, and how
 * long output may rest before a partial window comes back. */
#define FOLLOW_TIMEOUT_S 30.0
#define FOLLOW_WINDOW SHELL_OUTPUT_LIMIT_MAX
#define FOLLOW_IDLE_FLUSH_S 0.1
#define INPUT_TIMEOUT_S 5.0
/* run without --follow answers as soon as the job started (1 ms). */
#define RUN_NO_WAIT_S 0.001

struct answer {
        struct cli_reply reply;
        json_t *root; /* the body, a JSON object */
};

struct job_result {
        const char *job_id, *status, *output;
        size_t output_len;
        int done, truncated;
        json_int_t offset, exit_code;
        bool has_exit;
};

static void answer_free(struct answer *ans)
{
        json_decref(ans->root);
        cli_reply_free(&ans->reply);
        *ans = (struct answer){0};
}

static int server_error(const struct shell_args *a, const struct answer *ans)
{
        const char *code = NULL, *message = "";
        if (ans->root && json_unpack(ans->root, "{s:{s:s, s?s}}", "error", "code", &code, "message",
                                     &message) == 0) {
                cli_error("%s: %s%s", code, message,
                          ans->reply.status == 401 ? " (set SHELLCTL_AUTH_TOKEN)" : "");
                return CLI_EXIT_SERVER;
        }
        cli_error("%s: unexpected answer (HTTP %ld), not a lockbox shell API?", a->opts.server,
                  ans->reply.status);
        return CLI_EXIT_SERVER;
}

/* One call; body is consumed (NULL: none). 0 with *ans holding a 2xx
 * JSON object, else the exit code, the error said. */
static int api_call(const struct shell_args *a, const char *method, const char *path, json_t *body,
                    struct answer *ans)
{
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        *ans = (struct answer){0};
        if (body && !text) {
                cli_error("cannot encode the request");
                return CLI_EXIT_USAGE;
        }
        char err[1024];
        if (cli_transport_call(&a->opts, method, path, text, text ? strlen(text) : 0, &ans->reply,
                               err, sizeof(err)) < 0) {
                cli_error("%s", err);
                return CLI_EXIT_SERVER;
        }
        /* JSON_ALLOW_NUL: a job's output may hold NUL bytes (\u0000) */
        ans->root = json_loadb(ans->reply.body.data, ans->reply.body.len, JSON_ALLOW_NUL, NULL);
        if (ans->reply.status < 200 || ans->reply.status > 299 || !json_is_object(ans->root)) {
                int code = server_error(a, ans);
                answer_free(ans);
                return code;
        }
        return 0;
}

static int write_out(const char *p, size_t n)
{
        int r = file_write_all(STDOUT_FILENO, p, n);
        if (r < 0)
                cli_error("cannot write the output: %s", strerror(-r));
        return r < 0 ? CLI_EXIT_USAGE : 0;
}

/* --json: the API's answer as it came. */
static int print_raw(const struct answer *ans)
{
        return write_out(ans->reply.body.data, ans->reply.body.len);
}

static int result_unpack(const struct shell_args *a, json_t *root, struct job_result *ret)
{
        struct job_result r = {0};
        json_t *exit_code = NULL;
        if (json_unpack(root, "{s:s, s:b, s:s, s:o, s:s%, s:I, s:b}", "job_id", &r.job_id, "done",
                        &r.done, "status", &r.status, "exit_code", &exit_code, "output", &r.output,
                        &r.output_len, "offset", &r.offset, "truncated", &r.truncated) < 0) {
                cli_error("%s: answer without a job's result", a->opts.server);
                return CLI_EXIT_SERVER;
        }
        r.has_exit = json_is_integer(exit_code);
        r.exit_code = r.has_exit ? json_integer_value(exit_code) : 0;
        *ret = r;
        return 0;
}

/* The job's end as this process's exit code, said on stderr unless the
 * job exited by itself. */
static int job_exit_code(const struct job_result *r)
{
        if (strcmp(r->status, "failed") == 0) {
                cli_error("job %s failed to start (exit code %lld)", r->job_id,
                          (long long)r->exit_code);
                return CLI_EXIT_JOB_FAILED;
        }
        if (strcmp(r->status, "lost") == 0) {
                cli_error("job %s was lost: its keeper ended before the job", r->job_id);
                return CLI_EXIT_JOB_LOST;
        }
        bool in_range = r->has_exit && r->exit_code >= 0 && r->exit_code <= 255;
        if (strcmp(r->status, "exited") != 0)
                cli_error("job %s %s (exit code %lld)", r->job_id, r->status,
                          (long long)r->exit_code);
        return in_range ? (int)r->exit_code : CLI_EXIT_KILLED;
}

static bool job_id_ok(const char *id)
{
        size_t n = strspn(id, "0123456789abcdef");
        if (n == SHELL_JOB_ID_LEN && !id[n])
                return true;
        cli_error("'%s' is not a job id (16 hex digits)", id);
        return false;
}

static json_t *wait_body(json_int_t offset, double timeout)
{
        return json_pack("{s:I, s:f, s:i, s:f}", "offset", offset, "timeout", timeout,
                         "output_limit", FOLLOW_WINDOW, "idle_flush_seconds", FOLLOW_IDLE_FLUSH_S);
}

/* Wait calls from offset until the job is done and nothing is left; its
 * output written when print. The exit code. */
static int follow(const struct shell_args *a, const char *id, json_int_t offset, bool print)
{
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%s/wait", id);
        double timeout =
            (a->seen & SH_OPT_TIMEOUT) && a->timeout > 0 ? a->timeout : FOLLOW_TIMEOUT_S;
        for (;;) {
                struct answer ans;
                struct job_result r = {0};
                int code = api_call(a, "POST", path, wait_body(offset, timeout), &ans);
                if (code == 0)
                        code = result_unpack(a, ans.root, &r);
                if (code == 0 && print)
                        code = write_out(r.output, r.output_len);
                if (code == 0 && r.done && !r.truncated)
                        code = job_exit_code(&r);
                else if (code == 0)
                        code = -1;
                offset = code == -1 ? r.offset : offset;
                answer_free(&ans);
                if (code != -1)
                        return code;
        }
}

/* ---- run ---------------------------------------------------------------- */

static int script_read(const struct shell_args *a, struct strbuf *sb)
{
        strbuf_init(sb, CLI_SOURCE_MAX);
        if (a->n_pos == 1)
                return strbuf_appends(sb, a->pos[0]) < 0 ? CLI_EXIT_USAGE : 0;
        const char *path = a->file ? a->file : "-";
        int r = strcmp(path, "-") == 0 ? file_read_fd(STDIN_FILENO, sb)
                                       : file_read(path, 0, CLI_SOURCE_MAX, sb);
        if (r < 0) {
                cli_error("%s: %s", strcmp(path, "-") == 0 ? "standard input" : path,
                          r == -E2BIG ? "larger than 16 MiB" : strerror(-r));
                return CLI_EXIT_USAGE;
        }
        if (sb->len == 0) {
                cli_error("shell run: the script is empty");
                return CLI_EXIT_USAGE;
        }
        return 0;
}

static int run_env(const struct shell_args *a, json_t *body)
{
        if (a->n_env == 0)
                return 0;
        json_t *env = json_object();
        if (!env || json_object_set_new(body, "env", env) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < a->n_env; i++) {
                const char *eq = strchr(a->env[i], '=');
                json_t *v = json_string(eq + 1);
                if (!v || json_object_setn_new(env, a->env[i], (size_t)(eq - a->env[i]), v) < 0)
                        return -EINVAL;
        }
        return 0;
}

static int run_fields(const struct shell_args *a, json_t *body)
{
        int r = 0;
        if (a->cwd)
                r |= json_object_set_new(body, "cwd", json_string(a->cwd));
        if (a->mode)
                r |= json_object_set_new(body, "mode", json_string(a->mode));
        if (a->session)
                r |= json_object_set_new(body, "session_id", json_string(a->session));
        if (a->seen & (SH_OPT_COLS | SH_OPT_ROWS))
                r |= json_object_set_new(body, "terminal",
                                         json_pack("{s:i, s:i}", "cols",
                                                   a->cols ? (int)a->cols : 200, "rows",
                                                   a->rows ? (int)a->rows : 50));
        return r < 0 ? -EINVAL : run_env(a, body);
}

static json_t *run_body(const struct shell_args *a, const struct strbuf *script)
{
        bool follow_on = a->seen & SH_OPT_FOLLOW;
        double timeout = (a->seen & SH_OPT_TIMEOUT) && a->timeout > 0 ? a->timeout
                         : follow_on                                  ? FOLLOW_TIMEOUT_S
                                                                      : RUN_NO_WAIT_S;
        json_t *body = json_pack("{s:s%, s:f, s:i, s:f}", "script", script->data, script->len,
                                 "timeout", timeout, "output_limit", FOLLOW_WINDOW,
                                 "idle_flush_seconds", FOLLOW_IDLE_FLUSH_S);
        if (body && run_fields(a, body) < 0) {
                json_decref(body);
                return NULL;
        }
        return body;
}

int shell_cmd_run(const struct shell_args *a)
{
        struct strbuf script;
        int code = script_read(a, &script);
        json_t *body = code == 0 ? run_body(a, &script) : NULL;
        strbuf_free(&script);
        if (code)
                return code;
        if (!body) {
                cli_error("shell run: the script, --env or --cwd is not UTF-8 text");
                return CLI_EXIT_USAGE;
        }
        struct answer ans;
        struct job_result r;
        if ((code = api_call(a, "POST", "/v1/jobs/run", body, &ans)) != 0)
                return code;
        if (a->seen & SH_OPT_JSON)
                code = print_raw(&ans);
        else if ((code = result_unpack(a, ans.root, &r)) == 0 && !(a->seen & SH_OPT_FOLLOW))
                code = printf("%s\n", r.job_id) < 0 ? CLI_EXIT_USAGE : 0;
        else if (code == 0 && (code = write_out(r.output, r.output_len)) == 0) {
                char id[SHELL_JOB_ID_LEN + 1];
                snprintf(id, sizeof(id), "%s", r.job_id);
                json_int_t offset = r.offset;
                bool over = r.done && !r.truncated;
                code = over ? job_exit_code(&r) : -1;
                answer_free(&ans);
                return over ? code : follow(a, id, offset, true);
        }
        answer_free(&ans);
        return code;
}

/* ---- wait, input, tail ---------------------------------------------------- */

int shell_cmd_wait(const struct shell_args *a)
{
        const char *id = a->pos[0];
        if (!job_id_ok(id))
                return CLI_EXIT_USAGE;
        json_int_t offset = a->seen & SH_OPT_OFFSET ? a->offset : 0;
        if (!(a->seen & SH_OPT_JSON))
                return follow(a, id, offset, a->seen & SH_OPT_FOLLOW);
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%s/wait", id);
        struct answer ans;
        double timeout = a->seen & SH_OPT_TIMEOUT ? a->timeout : 0;
        int code = api_call(a, "POST", path,
                            json_pack("{s:I, s:f}", "offset", offset, "timeout", timeout), &ans);
        if (code == 0)
                code = print_raw(&ans);
        answer_free(&ans);
        return code;
}

/* Where the job's output ends now. */
static int output_end(const struct shell_args *a, const char *id, json_int_t *ret)
{
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%s", id);
        struct answer ans;
        int code = api_call(a, "GET", path, NULL, &ans);
        if (code == 0 && json_unpack(ans.root, "{s:I}", "offset", ret) < 0) {
                cli_error("%s: answer without the job's offset", a->opts.server);
                code = CLI_EXIT_SERVER;
        }
        answer_free(&ans);
        return code;
}

static int input_text(const struct shell_args *a, struct strbuf *sb)
{
        strbuf_init(sb, SHELL_OUTPUT_LIMIT_MAX);
        int r = a->n_pos == 2 ? strbuf_appends(sb, a->pos[1]) : file_read_fd(STDIN_FILENO, sb);
        if (r < 0)
                cli_error("shell input: %s", r == -E2BIG ? "text larger than 1 MiB" : strerror(-r));
        return r < 0 ? CLI_EXIT_USAGE : 0;
}

int shell_cmd_input(const struct shell_args *a)
{
        const char *id = a->pos[0];
        json_int_t offset = a->offset;
        struct strbuf text;
        if (!job_id_ok(id))
                return CLI_EXIT_USAGE;
        int code = input_text(a, &text);
        if (code == 0 && !(a->seen & SH_OPT_OFFSET))
                code = output_end(a, id, &offset);
        double timeout = a->seen & SH_OPT_TIMEOUT ? a->timeout : INPUT_TIMEOUT_S;
        json_t *body =
            code ? NULL
                 : json_pack("{s:s%, s:I, s:f, s:i}", "text", text.data ? text.data : "", text.len,
                             "offset", offset, "timeout", timeout, "output_limit", FOLLOW_WINDOW);
        strbuf_free(&text);
        if (code)
                return code;
        if (!body) {
                cli_error("shell input: the text is not UTF-8");
                return CLI_EXIT_USAGE;
        }
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%s/input", id);
        struct answer ans;
        struct job_result r;
        if ((code = api_call(a, "POST", path, body, &ans)) != 0)
                return code;
        if (a->seen & SH_OPT_JSON)
                code = print_raw(&ans);
        else if ((code = result_unpack(a, ans.root, &r)) == 0)
                code = write_out(r.output, r.output_len);
        answer_free(&ans);
        return code;
}

int shell_cmd_tail(const struct shell_args *a)
{
        const char *id = a->pos[0];
        if (!job_id_ok(id))
                return CLI_EXIT_USAGE;
        char path[96];
        snprintf(path, sizeof(path), "/v1/jobs/%s/log/tail?output_limit=%ld", id,
                 a->seen & SH_OPT_LIMIT ? a->limit : (long)SHELL_OUTPUT_LIMIT_DEFAULT);
        struct answer ans;
        struct job_result r;
        int code = api_call(a, "GET", path, NULL, &ans);
        if (code)
                return code;
        if (a->seen & SH_OPT_JSON)
                code = print_raw(&ans);
        else if ((code = result_unpack(a, ans.root, &r)) == 0)
                code = write_out(r.output, r.output_len);
        answer_free(&ans);
        return code;
}

/* ---- ls, kill, rm ----------------------------------------------------------- */

static const char *time_or_dash(json_t *job, const char *name)
{
        const char *s = json_string_value(json_object_get(job, name));
        return s ? s : "-";
}

static int ls_table(const struct shell_args *a, json_t *root)
{
        json_t *jobs = json_object_get(root, "jobs"), *job;
        size_t i;
        if (!json_is_array(jobs)) {
                cli_error("%s: answer without a list of jobs", a->opts.server);
                return CLI_EXIT_SERVER;
        }
        printf("%-16s  %-10s  %-20s  %-20s  %s\n", "JOB", "STATUS", "CREATED", "STARTED", "ENDED");
        json_array_foreach(jobs, i, job)
        {
                const char *id = json_string_value(json_object_get(job, "job_id"));
                const char *status = json_string_value(json_object_get(job, "status"));
                printf("%-16s  %-10s  %-20s  %-20s  %s\n", id ? id : "?", status ? status : "?",
                       time_or_dash(job, "created_at"), time_or_dash(job, "started_at"),
                       time_or_dash(job, "ended_at"));
        }
        return fflush(stdout) == 0 ? 0 : CLI_EXIT_USAGE;
}

/* A query value: the API's status names are plain words. */
static bool query_word(const char *s)
{
        return strspn(s, "abcdefghijklmnopqrstuvwxyz_") == strlen(s);
}

int shell_cmd_ls(const struct shell_args *a)
{
        if (a->status && !query_word(a->status)) {
                cli_error("shell ls: '%s' is not a job status", a->status);
                return CLI_EXIT_USAGE;
        }
        char path[128];
        snprintf(path, sizeof(path), "/v1/jobs?limit=%ld%s%s",
                 a->seen & SH_OPT_LIMIT ? a->limit : 50L, a->status ? "&status=" : "",
                 a->status ? a->status : "");
        struct answer ans;
        int code = api_call(a, "GET", path, NULL, &ans);
        if (code == 0)
                code = a->seen & SH_OPT_JSON ? print_raw(&ans) : ls_table(a, ans.root);
        answer_free(&ans);
        return code;
}

int shell_cmd_kill(const struct shell_args *a)
{
        const char *id = a->pos[0];
        if (!job_id_ok(id))
                return CLI_EXIT_USAGE;
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%s/terminate", id);
        json_t *body =
            a->seen & SH_OPT_GRACE ? json_pack("{s:f}", "grace_seconds", a->grace) : json_object();
        struct answer ans;
        int code = api_call(a, "POST", path, body, &ans);
        if (code)
                return code;
        const char *status = json_string_value(json_object_get(ans.root, "status"));
        json_t *exit_code = json_object_get(ans.root, "exit_code");
        if (a->seen & SH_OPT_JSON)
                code = print_raw(&ans);
        else if (printf("%s %s exit_code=%lld\n", id, status ? status : "?",
                        (long long)json_integer_value(exit_code)) < 0)
                code = CLI_EXIT_USAGE;
        answer_free(&ans);
        return code;
}

int shell_cmd_rm(const struct shell_args *a)
{
        const char *id = a->pos[0];
        if (!job_id_ok(id))
                return CLI_EXIT_USAGE;
        char path[128];
        if (a->seen & SH_OPT_GRACE)
                snprintf(path, sizeof(path), "/v1/jobs/%s?force=%s&grace_seconds=%g", id,
                         a->seen & SH_OPT_FORCE ? "true" : "false", a->grace);
        else
                snprintf(path, sizeof(path), "/v1/jobs/%s?force=%s", id,
                         a->seen & SH_OPT_FORCE ? "true" : "false");
        struct answer ans;
        int code = api_call(a, "DELETE", path, NULL, &ans);
        if (code == 0 && (a->seen & SH_OPT_JSON))
                code = print_raw(&ans);
        answer_free(&ans);
        return code;
}
