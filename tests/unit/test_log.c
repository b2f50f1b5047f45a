/* Unit tests for base/log.c: the logfmt-to-JSON conversion (numbers,
 * quoted values, stray words, escapes, clipping to the buffer), log_q's
 * quoting, the line log_emit writes to each sink (fields, order, debug
 * filter, JSON mode, the length cap, errno kept), and the file sink's
 * reopen for log rotation. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "test.h"

/* logfmt -> JSON text through a roomy buffer. */
static const char *to_json(const char *line)
{
        static char out[4096];
        size_t n = log_logfmt_to_json(line, strlen(line), out, sizeof(out));
        if (n != strlen(out))
                return "(length differs from the text)";
        return out;
}

TEST(log_json_numbers_strings_and_quoted_values)
{
        EXPECT_STR_EQ(to_json("level=info pid=42 event=run.start"),
                      "{\"level\":\"info\",\"pid\":42,\"event\":\"run.start\"}");
        EXPECT_STR_EQ(to_json("a=-7 b=0 c=007 d=- e=1.5 f=12a"),
                      "{\"a\":-7,\"b\":0,\"c\":\"007\",\"d\":\"-\",\"e\":\"1.5\",\"f\":\"12a\"}");
        /* Past 15 digits a number may not survive a double: kept as text. */
        EXPECT_STR_EQ(to_json("n=123456789012345 m=1234567890123456"),
                      "{\"n\":123456789012345,\"m\":\"1234567890123456\"}");
        EXPECT_STR_EQ(to_json("msg=\"two words\" path=\"/tmp/a b\""),
                      "{\"msg\":\"two words\",\"path\":\"/tmp/a b\"}");
        EXPECT_STR_EQ(to_json("empty= q=\"\""), "{\"empty\":\"\",\"q\":\"\"}");
}

TEST(log_json_escapes_and_unescapes)
{
        /* logfmt's \" and \\ inside quotes become JSON's \" and \\. */
        EXPECT_STR_EQ(to_json("v=\"say \\\"hi\\\" c:\\\\x\""),
                      "{\"v\":\"say \\\"hi\\\" c:\\\\x\"}");
        /* control bytes and DEL in a bare value are \u escapes */
        EXPECT_STR_EQ(to_json("v=a\tb\x01\x7f"), "{\"v\":\"a\\u0009b\\u0001\\u007f\"}");
        /* a quote in a bare value is escaped, UTF-8 passes as it is */
        EXPECT_STR_EQ(to_json("v=a\"b w=caf\xc3\xa9"), "{\"v\":\"a\\\"b\",\"w\":\"caf\xc3\xa9\"}");
}

TEST(log_json_stray_words_spaces_and_unterminated_quotes)
{
        EXPECT_STR_EQ(to_json("  a=1   oops  b=2 "), "{\"a\":1,\"msg\":\"oops\",\"b\":2}");
        EXPECT_STR_EQ(to_json(""), "{}");
        EXPECT_STR_EQ(to_json("   "), "{}");
        EXPECT_STR_EQ(to_json("v=\"no end"), "{\"v\":\"no end\"}");
        EXPECT_STR_EQ(to_json("v=\"ends in backslash\\"), "{\"v\":\"ends in backslash\\\\\"}");
}

/* Every line a caller may write must come out as one JSON object that
 * parses and has the same keys and values. */
TEST(log_json_output_parses_back)
{
        const char *line = "time=2024-01-02T03:04:05.678Z level=warn proc=jailer pid=9 "
                           "trace_id=0af7651916cd43dd8448eb211c80319c event=run.end status=ok "
                           "wall_ms=12 error=\"x = \\\"y\\\"\" word";
        json_error_t e;
        json_t *o = json_loads(to_json(line), 0, &e);
        EXPECT_NOT_NULL(o);
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "level")), "warn");
        EXPECT_INT_EQ(json_integer_value(json_object_get(o, "pid")), 9);
        EXPECT_INT_EQ(json_integer_value(json_object_get(o, "wall_ms")), 12);
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "error")), "x = \"y\"");
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "msg")), "word");
        EXPECT_SIZE_EQ(json_object_size(o), 10);
        json_decref(o);
}

/* A buffer too small for the line: the output still fits, ends the
 * object and is a JSON object that parses (pairs that did not fit are
 * left out whole). */
TEST(log_json_clipped_output_is_still_an_object)
{
        const char *line = "alpha=1 beta=\"some text\" gamma=\x01\x02\x03 delta=word";
        char full[512];
        size_t n_full = log_logfmt_to_json(line, strlen(line), full, sizeof(full));
        for (size_t cap = 3; cap <= n_full + 1; cap++) {
                char out[512];
                memset(out, 'X', sizeof(out));
                size_t n = log_logfmt_to_json(line, strlen(line), out, cap);
                EXPECT_UINT_OP(n, <, cap);
                EXPECT_INT_EQ(out[n], '\0');
                EXPECT_INT_EQ(out[cap], 'X'); /* nothing written past the buffer */
                EXPECT_INT_EQ(out[n - 1], '}');
                json_error_t e;
                json_t *o = json_loads(out, 0, &e);
                if (!o)
                        test_fail(__FILE__, __LINE__, "cap %zu: not JSON: %s (%s)", cap, out,
                                  e.text);
                EXPECT_NOT_NULL(o);
                EXPECT_TRUE(json_is_object(o));
                json_decref(o);
        }
        /* the full text at its own size, and nothing but a NUL below 3 bytes */
        char exact[512];
        EXPECT_UINT_EQ(log_logfmt_to_json(line, strlen(line), exact, n_full + 1), n_full);
        EXPECT_STR_EQ(exact, full);
        EXPECT_UINT_EQ(log_logfmt_to_json(line, strlen(line), exact, 2), 0);
        EXPECT_STR_EQ(exact, "");
        EXPECT_UINT_EQ(log_logfmt_to_json(line, strlen(line), exact, 0), 0);
}

TEST(log_q_quotes_escapes_and_caps)
{
        EXPECT_STR_EQ(log_q("plain"), "\"plain\"");
        EXPECT_STR_EQ(log_q(NULL), "\"\"");
        EXPECT_STR_EQ(log_q("a \"b\" c\\d"), "\"a \\\"b\\\" c\\\\d\"");
        EXPECT_STR_EQ(log_q("line\nbreak\ttab\x7f"), "\"line break tab \"");
        /* four results stay valid at once (one log line's worth) */
        const char *a = log_q("1"), *b = log_q("2"), *c = log_q("3"), *d = log_q("4");
        EXPECT_STR_EQ(a, "\"1\"");
        EXPECT_STR_EQ(b, "\"2\"");
        EXPECT_STR_EQ(c, "\"3\"");
        EXPECT_STR_EQ(d, "\"4\"");
        char big[2000];
        memset(big, '"', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        const char *q = log_q(big);
        size_t n = strlen(q);
        EXPECT_UINT_OP(n, <, 512);
        EXPECT_INT_EQ(q[n - 1], '"');
        EXPECT_INT_EQ(q[n - 2], '"'); /* ends on a whole \" pair, then the closing quote */
        EXPECT_INT_EQ(q[n - 3], '\\');
}

/* The lines log_emit wrote to a file sink, with stderr sent to /dev/null. */
static char *emit_capture(void (*emit)(void))
{
        char path[] = "/tmp/lockbox-unit-log-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0)
                return NULL;
        unlink(path);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        int saved = dup(STDERR_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
        log_setup("unit", false, fd);
        emit();
        dup2(saved, STDERR_FILENO);
        close(saved);
        char *buf = calloc(1, 16384);
        ssize_t n = buf ? pread(fd, buf, 16383, 0) : -1;
        close(fd);
        if (n < 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static void emit_two(void)
{
        log_info("0af7651916cd43dd8448eb211c80319c", "run.end", "status=%s wall_ms=%d", "ok", 5);
        log_debug(NULL, "hidden", "x=1");
        log_error(NULL, "jail.step", "step=mounts reason=%s", log_q("Permission denied"));
}

TEST(log_emit_writes_logfmt_lines)
{
        char *text = emit_capture(emit_two);
        EXPECT_NOT_NULL(text);
        char *second = strchr(text, '\n');
        EXPECT_NOT_NULL(second);
        *second++ = '\0';
        char want[256];
        snprintf(want, sizeof(want),
                 " level=info proc=unit pid=%d trace_id=0af7651916cd43dd8448eb211c80319c "
                 "event=run.end status=ok wall_ms=5",
                 (int)getpid());
        EXPECT_TRUE(strncmp(text, "time=", 5) == 0);
        /* time=YYYY-MM-DDTHH:MM:SS.mmmZ */
        EXPECT_INT_EQ(strlen("time=2024-01-02T03:04:05.678Z"), strchr(text, ' ') - text);
        EXPECT_INT_EQ(text[29 - 1], 'Z');
        EXPECT_STR_EQ(strchr(text, ' '), want);
        /* the debug line is left out, the error line has no trace_id */
        snprintf(want, sizeof(want),
                 " level=error proc=unit pid=%d event=jail.step step=mounts "
                 "reason=\"Permission denied\"\n",
                 (int)getpid());
        EXPECT_STR_EQ(strchr(second, ' '), want);
        free(text);
}

static void emit_json(void)
{
        log_set_json(true);
        log_warn(NULL, "config.key", "key=%s value=%d note=%s", "max_workers", 0,
                 log_q("tab\there"));
}

TEST(log_emit_json_mode_writes_one_object_per_line)
{
        char *text = emit_capture(emit_json);
        EXPECT_NOT_NULL(text);
        size_t n = strlen(text);
        EXPECT_UINT_OP(n, >, 0);
        EXPECT_INT_EQ(text[n - 1], '\n');
        EXPECT_NULL(memchr(text, '\n', n - 1));
        json_error_t e;
        json_t *o = json_loads(text, 0, &e);
        EXPECT_NOT_NULL(o);
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "level")), "warn");
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "proc")), "unit");
        EXPECT_INT_EQ(json_integer_value(json_object_get(o, "pid")), getpid());
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "event")), "config.key");
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "key")), "max_workers");
        EXPECT_INT_EQ(json_integer_value(json_object_get(o, "value")), 0);
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "note")), "tab here");
        EXPECT_NULL(json_object_get(o, "trace_id"));
        json_decref(o);
        free(text);
}

static void emit_long(void)
{
        static char big[5000];
        memset(big, 'v', sizeof(big) - 1);
        log_info(NULL, "long", "k=%s", big);
        errno = EPERM;
        log_info(NULL, "after", NULL);
        if (errno != EPERM)
                log_info(NULL, "errno.changed", NULL);
}

TEST(log_emit_caps_a_long_line_and_keeps_errno)
{
        char *text = emit_capture(emit_long);
        EXPECT_NOT_NULL(text);
        char *nl = strchr(text, '\n');
        EXPECT_NOT_NULL(nl);
        EXPECT_INT_EQ(nl - text, 2046); /* the line buffer less the newline and NUL */
        EXPECT_STR_CONTAINS(nl + 1, "event=after\n");
        EXPECT_STR_NOT_CONTAINS(nl + 1, "errno.changed");
        free(text);
}

TEST(log_reopen_file_follows_a_rotated_path)
{
        char dir[] = "/tmp/lockbox-unit-log-XXXXXX";
        EXPECT_NOT_NULL(mkdtemp(dir));
        char path[128], rotated[128];
        snprintf(path, sizeof(path), "%s/lockboxd.log", dir);
        snprintf(rotated, sizeof(rotated), "%s/lockboxd.log.1", dir);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(null, STDERR_FILENO);
        close(null);
        log_setup("unit", false, -1);
        EXPECT_ERRNO(log_reopen_file(), 0); /* no file sink: nothing to do */
        EXPECT_ERRNO(log_open_file(path), 0);
        int fd = log_get_file_fd();
        EXPECT_INT_OP(fd, >=, 0);
        EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        struct stat st;
        EXPECT_INT_EQ(stat(path, &st), 0);
        EXPECT_INT_EQ(st.st_mode & 0777, 0640 & ~umask(022));
        log_info(NULL, "before", NULL);
        EXPECT_INT_EQ(rename(path, rotated), 0);
        EXPECT_ERRNO(log_reopen_file(), 0);
        EXPECT_INT_EQ(log_get_file_fd(), fd); /* same number: other processes keep it */
        log_info(NULL, "after", NULL);
        char buf[1024] = "";
        int a = open(rotated, O_RDONLY | O_CLOEXEC), b = open(path, O_RDONLY | O_CLOEXEC);
        EXPECT_INT_OP(read(a, buf, sizeof(buf) - 1), >, 0);
        EXPECT_STR_CONTAINS(buf, "event=before");
        EXPECT_STR_NOT_CONTAINS(buf, "event=after");
        memset(buf, 0, sizeof(buf));
        EXPECT_INT_OP(read(b, buf, sizeof(buf) - 1), >, 0);
        EXPECT_STR_CONTAINS(buf, "event=after");
        close(a);
        close(b);
        /* A path that cannot be opened keeps the old file in use. */
        char missing[160];
        snprintf(missing, sizeof(missing), "%s/no/such/dir.log", dir);
        EXPECT_ERRNO(log_open_file(missing), -ENOENT);
        EXPECT_INT_EQ(log_get_file_fd(), fd);
        unlink(path);
        unlink(rotated);
        rmdir(dir);
}

TEST(log_replace_file_takes_the_fd_number_over)
{
        int p1[2], p2[2];
        EXPECT_INT_EQ(pipe2(p1, O_CLOEXEC), 0);
        EXPECT_INT_EQ(pipe2(p2, O_CLOEXEC), 0);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(null, STDERR_FILENO);
        close(null);
        log_setup("unit", false, p1[1]);
        log_replace_file(p2[1]); /* the new file now lives at p1[1]'s number */
        EXPECT_INT_EQ(log_get_file_fd(), p1[1]);
        EXPECT_INT_EQ(fcntl(p2[1], F_GETFD), -1); /* consumed */
        log_info(NULL, "moved", NULL);
        char buf[512] = "";
        EXPECT_INT_OP(read(p2[0], buf, sizeof(buf) - 1), >, 0);
        EXPECT_STR_CONTAINS(buf, "event=moved");
        /* no sink yet: the fd becomes the sink as it is */
        log_setup("unit", false, -1);
        int p3[2];
        EXPECT_INT_EQ(pipe2(p3, O_CLOEXEC), 0);
        log_replace_file(p3[1]);
        EXPECT_INT_EQ(log_get_file_fd(), p3[1]);
}

static void emit_json_expanding(void)
{
        static char ctl[1900];
        memset(ctl, '\x01', sizeof(ctl) - 1); /* six bytes each in JSON */
        log_set_json(true);
        log_info(NULL, "first", "a=1 b=%s c=2", ctl);
}

/* A line that grows past the JSON buffer when escaped: still one object
 * on one line, keeping the pairs before the one that did not fit. */
TEST(log_emit_json_clips_an_expanding_line_to_an_object)
{
        char *text = emit_capture(emit_json_expanding);
        EXPECT_NOT_NULL(text);
        size_t n = strlen(text);
        EXPECT_UINT_OP(n, <, 4096);
        EXPECT_INT_EQ(text[n - 1], '\n');
        json_error_t e;
        json_t *o = json_loads(text, 0, &e);
        EXPECT_NOT_NULL(o);
        EXPECT_STR_EQ(json_string_value(json_object_get(o, "event")), "first");
        EXPECT_INT_EQ(json_integer_value(json_object_get(o, "a")), 1);
        EXPECT_NULL(json_object_get(o, "b"));
        EXPECT_NULL(json_object_get(o, "c"));
        json_decref(o);
        free(text);
}
