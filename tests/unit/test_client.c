/* Unit tests for ipc/client.c against a fake jailer in a forked process,
 * over a socketpair: the RUN message, the code pipe's framing (also when
 * the pipe takes it in many short pieces), stdout and stderr collected
 * whole, the shared output cap with exactly one KILL, the output verdict
 * when the program ended first, a jailer that dies before or after
 * STARTED, a half message, a wrong message, a deadline, a refused run,
 * and ipc_deps_update. The fake reports what it saw in its exit status. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/channel.h"
#include "ipc/client.h"
#include "ipc/proto.h"
#include "test.h"

#define TRACE "0af7651916cd43dd8448eb211c80319c"

/* Exit statuses of the fake, so a failure says what it saw. */
enum fake_status {
        FAKE_OK = 0,
        FAKE_NO_RUN = 10,  /* no well-formed RUN arrived */
        FAKE_BAD_RUN = 11, /* RUN's fields were not the parameters */
        FAKE_BAD_CODE = 12,
        FAKE_NO_KILL = 13,
        FAKE_TWO_KILLS = 14,
        FAKE_IO = 15,
};

enum scenario {
        SC_NORMAL,      /* read the code, write both streams, RESULT */
        SC_SLOW,        /* read the code in small pieces, write in small pieces */
        SC_CAP_KILL,    /* write past the cap, wait for KILL, then RESULT */
        SC_CAP_ENDED,   /* write past the cap, RESULT at once (the program ended) */
        SC_DIE_BEFORE,  /* take RUN, die */
        SC_DIE_AFTER,   /* STARTED, then die with the pipes open */
        SC_HALF_RESULT, /* STARTED, then half a RESULT */
        SC_BAD_MAGIC,   /* a RESULT with the wrong magic */
        SC_TWO_FDS,     /* STARTED with two fds instead of three */
        SC_SILENT,      /* STARTED, then nothing until killed */
        SC_REFUSED,     /* RESULT (BUSY) instead of STARTED */
        SC_NO_READER,   /* the program never reads its code */
};

struct fake_run {
        int chan, code_r, out_w, err_w;
};

static const char *run_code(void)
{
        return "print('hello')\n";
}

static int recv_wait(int sock, void *msg, size_t len, int *fds, size_t max_fds, size_t *nf,
                     int timeout_ms)
{
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
                return -ETIMEDOUT;
        return channel_recv(sock, msg, len, fds, max_fds, nf);
}

/* Take RUN, check it, make the run's pipes and send STARTED. */
static int fake_start(int ctrl, const struct ipc_run_params *want, struct fake_run *r,
                      bool send_started)
{
        struct proto_run m;
        size_t nf = 0;
        if (recv_wait(ctrl, &m, sizeof(m), &r->chan, 1, &nf, 5000) != 1 || nf != 1)
                return FAKE_NO_RUN;
        if (m.hdr.magic != PROTO_MAGIC || m.hdr.type != PROTO_RUN || m.language != want->language ||
            m.network != want->network || strcmp(m.trace_id, want->trace_id) != 0)
                return FAKE_BAD_RUN;
        if (!send_started)
                return FAKE_OK;
        int code[2], out[2], err[2];
        if (pipe2(code, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
                return FAKE_IO;
        struct proto_started st = {.hdr = {PROTO_MAGIC, PROTO_STARTED}, .warm = 1};
        int fds[] = {code[1], out[0], err[0]};
        if (channel_send(r->chan, &st, sizeof(st), fds, 3) < 0)
                return FAKE_IO;
        close(code[1]);
        close(out[0]);
        close(err[0]);
        r->code_r = code[0];
        r->out_w = out[1];
        r->err_w = err[1];
        return FAKE_OK;
}

/* The code pipe must carry the preload's length (8 bytes, little
 * endian), the preload, the code, then EOF. */
static int fake_read_code(const struct fake_run *r, const struct ipc_run_params *want, size_t piece)
{
        size_t total = 8 + want->preload_len + want->code_len;
        char *buf = malloc(total + 1);
        size_t got = 0;
        for (;;) {
                size_t room = total + 1 - got;
                ssize_t n = read(r->code_r, buf + got, room < piece ? room : piece);
                if (n < 0 || (n == 0 && got != total)) {
                        free(buf);
                        return FAKE_BAD_CODE;
                }
                if (n == 0)
                        break;
                got += (size_t)n;
                if (got > total) {
                        free(buf);
                        return FAKE_BAD_CODE;
                }
        }
        uint64_t plen = 0;
        for (int i = 0; i < 8; i++)
                plen |= (uint64_t)(uint8_t)buf[i] << (8 * i);
        bool ok = plen == want->preload_len &&
                  memcmp(buf + 8, want->preload, want->preload_len) == 0 &&
                  memcmp(buf + 8 + plen, want->code, want->code_len) == 0;
        free(buf);
        return ok ? FAKE_OK : FAKE_BAD_CODE;
}

static int fake_result(const struct fake_run *r, const struct proto_result *res)
{
        return channel_send(r->chan, res, sizeof(*res), NULL, 0) < 0 ? FAKE_IO : FAKE_OK;
}

static struct proto_result result_of(int32_t exit_code, uint32_t reason)
{
        struct proto_result res = {.hdr = {PROTO_MAGIC, PROTO_RESULT},
                                   .status = RUN_STATUS_DONE,
                                   .exit_code = exit_code,
                                   .reason = reason,
                                   .wall_us = 1234,
                                   .cpu_us = 567,
                                   .memory_peak = 1 << 20};
        /* Not NUL-terminated on the wire: the client must end them. */
        memset(res.syscall_name, 's', sizeof(res.syscall_name));
        memset(res.message, 'm', sizeof(res.message));
        return res;
}

/* Count KILLs on the channel for a while (the client sends at most one). */
static int fake_count_kills(const struct fake_run *r, int wait_ms)
{
        int kills = 0;
        struct proto_header k;
        size_t nf = 0;
        int fd;
        while (recv_wait(r->chan, &k, sizeof(k), &fd, 0, &nf, wait_ms) == 1) {
                if (k.magic == PROTO_MAGIC && k.type == PROTO_KILL)
                        kills++;
                wait_ms = 200; /* after the first, only look for a second */
        }
        return kills;
}

static void fake_close_streams(struct fake_run *r)
{
        close(r->out_w);
        close(r->err_w);
        close(r->code_r);
}

static int fake_output_past_cap(struct fake_run *r, const struct ipc_run_params *want, bool wait)
{
        int s = fake_read_code(r, want, 65536);
        if (s != FAKE_OK)
                return s;
        char block[600];
        memset(block, 'o', sizeof(block));
        if (test_write_all(r->out_w, block, sizeof(block), sizeof(block)) < 0)
                return FAKE_IO;
        memset(block, 'e', sizeof(block));
        if (test_write_all(r->err_w, block, sizeof(block), sizeof(block)) < 0)
                return FAKE_IO;
        if (!wait) {
                fake_close_streams(r);
                struct proto_result res = result_of(0, REASON_NONE);
                int k = fake_result(r, &res);
                /* read the KILL the client may send meanwhile, as the
                 * jailer does: a unix socket closed with a message unread
                 * makes the peer's next recv fail with ECONNRESET, even
                 * with the RESULT waiting in its queue */
                if (k == FAKE_OK && fake_count_kills(r, 500) > 1)
                        k = FAKE_TWO_KILLS;
                return k;
        }
        int kills = fake_count_kills(r, 5000);
        if (kills != 1)
                return kills ? FAKE_TWO_KILLS : FAKE_NO_KILL;
        fake_close_streams(r);
        struct proto_result res = result_of(-1, REASON_OUTPUT);
        return fake_result(r, &res);
}

static int fake_normal(struct fake_run *r, const struct ipc_run_params *want, size_t piece)
{
        int s = fake_read_code(r, want, piece);
        if (s != FAKE_OK)
                return s;
        /* stdout in pieces, stderr at once; then the streams end */
        static char out[20000];
        for (size_t i = 0; i < sizeof(out); i++)
                out[i] = (char)('a' + i % 26);
        if (test_write_all(r->out_w, out, sizeof(out), piece) < 0 ||
            test_write_all(r->err_w, "warn\n", 5, 5) < 0)
                return FAKE_IO;
        fake_close_streams(r);
        struct proto_result res = result_of(3, REASON_NONE);
        return fake_result(r, &res);
}

static int fake_jailer(int ctrl, enum scenario sc, const struct ipc_run_params *want)
{
        struct fake_run r = {-1, -1, -1, -1};
        int s = fake_start(ctrl, want, &r, sc != SC_REFUSED && sc != SC_DIE_BEFORE);
        if (s != FAKE_OK || sc == SC_DIE_BEFORE || sc == SC_DIE_AFTER)
                return s;
        struct proto_result res = result_of(0, REASON_NONE);
        switch (sc) {
        case SC_NORMAL:
                return fake_normal(&r, want, 65536);
        case SC_SLOW:
                return fake_normal(&r, want, 7);
        case SC_CAP_KILL:
                return fake_output_past_cap(&r, want, true);
        case SC_CAP_ENDED:
                return fake_output_past_cap(&r, want, false);
        case SC_HALF_RESULT:
                return channel_send(r.chan, &res, sizeof(res) / 2, NULL, 0) < 0 ? FAKE_IO : FAKE_OK;
        case SC_BAD_MAGIC:
                fake_close_streams(&r);
                res.hdr.magic ^= 1;
                return fake_result(&r, &res);
        case SC_SILENT:
                pause();
                return FAKE_OK;
        case SC_REFUSED:
                res.status = RUN_STATUS_BUSY;
                res.exit_code = 0;
                return fake_result(&r, &res);
        case SC_NO_READER:
                fake_close_streams(&r);
                return fake_result(&r, &res);
        default:
                return FAKE_OK;
        }
}

/* SC_TWO_FDS needs its own STARTED. */
static int fake_two_fds(int ctrl, const struct ipc_run_params *want)
{
        struct fake_run r = {-1, -1, -1, -1};
        int s = fake_start(ctrl, want, &r, false);
        if (s != FAKE_OK)
                return s;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return FAKE_IO;
        struct proto_started st = {.hdr = {PROTO_MAGIC, PROTO_STARTED}};
        if (channel_send(r.chan, &st, sizeof(st), p, 2) < 0)
                return FAKE_IO;
        pause(); /* the client must give up on its own */
        return FAKE_OK;
}

struct client_run {
        int r;
        int fake_status; /* exit status, or 100 + signal */
        struct run_outcome o;
        int64_t elapsed_ms;
};

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ipc_run against a fake jailer playing sc; the fake is killed once
 * ipc_run has returned (so a silent one does not hang the case). */
static struct client_run run_against(enum scenario sc, const struct ipc_run_params *p)
{
        struct client_run cr = {.fake_status = -1};
        int ctrl[2];
        signal(SIGPIPE, SIG_IGN); /* as the HTTP process does */
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctrl) < 0)
                return cr;
        pid_t pid = fork();
        if (pid == 0) {
                close(ctrl[0]);
                _exit(sc == SC_TWO_FDS ? fake_two_fds(ctrl[1], p) : fake_jailer(ctrl[1], sc, p));
        }
        close(ctrl[1]);
        int64_t t0 = mono_ms();
        cr.r = ipc_run(ctrl[0], p, &cr.o);
        cr.elapsed_ms = mono_ms() - t0;
        close(ctrl[0]);
        if (sc == SC_SILENT || sc == SC_TWO_FDS)
                kill(pid, SIGKILL);
        int status;
        if (pid > 0 && waitpid(pid, &status, 0) == pid)
                cr.fake_status = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
        return cr;
}

static struct ipc_run_params params(void)
{
        return (struct ipc_run_params){.language = LANG_PYTHON3,
                                       .network = true,
                                       .trace_id = TRACE,
                                       .code = run_code(),
                                       .code_len = strlen(run_code()),
                                       .preload = "import sys\n",
                                       .preload_len = 11,
                                       .output_cap = 1 << 20,
                                       .deadline_ms = 5000};
}

static void check_normal_output(const struct client_run *cr)
{
        EXPECT_ERRNO(cr->r, 0);
        EXPECT_INT_EQ(cr->fake_status, FAKE_OK);
        EXPECT_SIZE_EQ(cr->o.out.len, 20000);
        for (size_t i = 0; i < 20000; i++)
                if (cr->o.out.data[i] != (char)('a' + i % 26)) {
                        test_fail(__FILE__, __LINE__, "stdout byte %zu differs", i);
                        return;
                }
        EXPECT_MEM_EQ(cr->o.err.data, cr->o.err.len, "warn\n", 5);
        EXPECT_FALSE(cr->o.truncated);
        EXPECT_TRUE(cr->o.warm);
        EXPECT_UINT_EQ(cr->o.res.status, RUN_STATUS_DONE);
        EXPECT_INT_EQ(cr->o.res.exit_code, 3);
        EXPECT_UINT_EQ(cr->o.res.reason, REASON_NONE);
        EXPECT_UINT_EQ(cr->o.res.wall_us, 1234);
        EXPECT_UINT_EQ(cr->o.res.cpu_us, 567);
        EXPECT_UINT_EQ(cr->o.res.memory_peak, 1 << 20);
        /* the jailer's strings are ended by the client, whatever came */
        EXPECT_SIZE_EQ(strlen(cr->o.res.syscall_name), sizeof(cr->o.res.syscall_name) - 1);
        EXPECT_SIZE_EQ(strlen(cr->o.res.message), sizeof(cr->o.res.message) - 1);
}

TEST(client_run_sends_code_and_collects_streams)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_NORMAL, &p);
        check_normal_output(&cr);
        run_outcome_free(&cr.o);
}

/* 1 MiB of code and 100 KiB of preload through a 64 KiB pipe read 7
 * bytes at a time, and stdout written 7 bytes at a time. */
TEST(client_run_short_reads_and_writes)
{
        struct ipc_run_params p = params();
        size_t clen = 1 << 20, plen = 100 << 10;
        char *code = malloc(clen), *pre = malloc(plen);
        EXPECT_TRUE(code && pre);
        for (size_t i = 0; i < clen; i++)
                code[i] = (char)(i * 31 + 7);
        for (size_t i = 0; i < plen; i++)
                pre[i] = (char)(i * 17 + 3);
        p.code = code;
        p.code_len = clen;
        p.preload = pre;
        p.preload_len = plen;
        p.deadline_ms = 8000;
        struct client_run cr = run_against(SC_SLOW, &p);
        check_normal_output(&cr);
        run_outcome_free(&cr.o);
        free(code);
        free(pre);
}

/* The cap is shared by stdout and stderr: 600 + 600 bytes against 1000
 * keeps 600 + 400, asks the jailer for exactly one KILL, and the verdict
 * is the jailer's. */
TEST(client_run_output_cap_sends_one_kill)
{
        struct ipc_run_params p = params();
        p.output_cap = 1000;
        struct client_run cr = run_against(SC_CAP_KILL, &p);
        EXPECT_ERRNO(cr.r, 0);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
        EXPECT_SIZE_EQ(cr.o.out.len, 600);
        EXPECT_SIZE_EQ(cr.o.err.len, 400);
        EXPECT_INT_EQ(cr.o.out.data[599], 'o');
        EXPECT_INT_EQ(cr.o.err.data[399], 'e');
        EXPECT_TRUE(cr.o.truncated);
        EXPECT_UINT_EQ(cr.o.res.reason, REASON_OUTPUT);
        EXPECT_INT_EQ(cr.o.res.exit_code, -1);
        run_outcome_free(&cr.o);
}

/* The program ended before the KILL could matter: its RESULT says it
 * ended by itself, but output was cut, so the verdict is the output
 * limit. */
TEST(client_run_output_cap_after_the_program_ended)
{
        struct ipc_run_params p = params();
        p.output_cap = 1000;
        struct client_run cr = run_against(SC_CAP_ENDED, &p);
        EXPECT_ERRNO(cr.r, 0);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
        EXPECT_SIZE_EQ(cr.o.out.len + cr.o.err.len, 1000);
        EXPECT_TRUE(cr.o.truncated);
        EXPECT_UINT_EQ(cr.o.res.reason, REASON_OUTPUT);
        EXPECT_INT_EQ(cr.o.res.exit_code, -1);
        run_outcome_free(&cr.o);
}

TEST(client_run_jailer_dies_before_started)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_DIE_BEFORE, &p);
        EXPECT_ERRNO(cr.r, -ECONNRESET);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
        EXPECT_INT_OP(cr.elapsed_ms, <, 4000);
}

TEST(client_run_jailer_dies_mid_run)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_DIE_AFTER, &p);
        EXPECT_ERRNO(cr.r, -ECONNRESET);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
        EXPECT_INT_OP(cr.elapsed_ms, <, 4000);
}

TEST(client_run_half_a_result_is_a_protocol_error)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_HALF_RESULT, &p);
        EXPECT_ERRNO(cr.r, -EPROTO);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
}

TEST(client_run_wrong_magic_is_a_protocol_error)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_BAD_MAGIC, &p);
        EXPECT_ERRNO(cr.r, -EPROTO);
}

TEST(client_run_started_without_three_fds_is_a_protocol_error)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_TWO_FDS, &p);
        EXPECT_ERRNO(cr.r, -EPROTO);
        EXPECT_INT_EQ(cr.fake_status, 100 + SIGKILL); /* still waiting: it was killed */
}

TEST(client_run_gives_up_at_its_deadline)
{
        struct ipc_run_params p = params();
        p.deadline_ms = 300;
        struct client_run cr = run_against(SC_SILENT, &p);
        EXPECT_ERRNO(cr.r, -ETIMEDOUT);
        EXPECT_INT_OP(cr.elapsed_ms, >=, 290);
        EXPECT_INT_OP(cr.elapsed_ms, <, 3000);
}

TEST(client_run_refused_run_has_no_output)
{
        struct ipc_run_params p = params();
        struct client_run cr = run_against(SC_REFUSED, &p);
        EXPECT_ERRNO(cr.r, 0);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
        EXPECT_UINT_EQ(cr.o.res.status, RUN_STATUS_BUSY);
        EXPECT_SIZE_EQ(cr.o.out.len + cr.o.err.len, 0);
        EXPECT_FALSE(cr.o.warm);
        run_outcome_free(&cr.o);
}

/* A program that never reads its code (it died first): the writer sees
 * EPIPE, stops feeding, and the run still ends with the RESULT. */
TEST(client_run_code_nobody_reads)
{
        struct ipc_run_params p = params();
        size_t clen = 1 << 20;
        char *code = calloc(1, clen);
        EXPECT_NOT_NULL(code);
        p.code = code;
        p.code_len = clen;
        struct client_run cr = run_against(SC_NO_READER, &p);
        EXPECT_ERRNO(cr.r, 0);
        EXPECT_INT_EQ(cr.fake_status, FAKE_OK);
        EXPECT_UINT_EQ(cr.o.res.status, RUN_STATUS_DONE);
        run_outcome_free(&cr.o);
        free(code);
}

TEST(client_run_jailer_gone_before_the_run)
{
        int ctrl[2];
        EXPECT_INT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctrl), 0);
        close(ctrl[1]);
        struct ipc_run_params p = params();
        struct run_outcome o;
        EXPECT_ERRNO(ipc_run(ctrl[0], &p, &o), -EPIPE);
}

/* ---- ipc_deps_update ---------------------------------------------------------- */

enum deps_scenario { DEPS_OK, DEPS_FAILED, DEPS_WRONG_TYPE, DEPS_DIE, DEPS_SILENT };

static int fake_deps(int ctrl, enum deps_scenario sc)
{
        struct proto_deps m;
        int chan = -1;
        size_t nf = 0;
        if (recv_wait(ctrl, &m, sizeof(m), &chan, 1, &nf, 5000) != 1 || nf != 1)
                return FAKE_NO_RUN;
        if (m.hdr.magic != PROTO_MAGIC || m.hdr.type != PROTO_DEPS || strcmp(m.trace_id, TRACE))
                return FAKE_BAD_RUN;
        if (sc == DEPS_DIE)
                return FAKE_OK;
        if (sc == DEPS_SILENT)
                pause();
        struct proto_deps_done d = {.hdr = {PROTO_MAGIC, PROTO_DEPS_DONE}, .ok = sc == DEPS_OK};
        memset(d.message, 'x', sizeof(d.message)); /* unterminated on the wire */
        if (sc == DEPS_FAILED)
                snprintf(d.message, sizeof(d.message), "No matching distribution found");
        if (sc == DEPS_WRONG_TYPE)
                d.hdr.type = PROTO_RESULT;
        return channel_send(chan, &d, sizeof(d), NULL, 0) < 0 ? FAKE_IO : FAKE_OK;
}

struct deps_run {
        int r, fake_status;
        bool ok;
        char message[64];
};

static struct deps_run deps_against(enum deps_scenario sc, int deadline_ms)
{
        struct deps_run dr = {.r = -1, .fake_status = -1};
        int ctrl[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctrl) < 0)
                return dr;
        pid_t pid = fork();
        if (pid == 0) {
                close(ctrl[0]);
                _exit(fake_deps(ctrl[1], sc));
        }
        close(ctrl[1]);
        strcpy(dr.message, "untouched");
        dr.r = ipc_deps_update(ctrl[0], TRACE, deadline_ms, &dr.ok, dr.message, sizeof(dr.message));
        close(ctrl[0]);
        if (sc == DEPS_SILENT)
                kill(pid, SIGKILL);
        int status;
        if (pid > 0 && waitpid(pid, &status, 0) == pid)
                dr.fake_status = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
        return dr;
}

TEST(client_deps_update_outcomes)
{
        struct deps_run dr = deps_against(DEPS_OK, 5000);
        EXPECT_ERRNO(dr.r, 0);
        EXPECT_INT_EQ(dr.fake_status, FAKE_OK);
        EXPECT_TRUE(dr.ok);
        /* 1023 bytes of 'x' came; the caller's 64 bytes hold 63 of them */
        EXPECT_SIZE_EQ(strlen(dr.message), sizeof(dr.message) - 1);
        dr = deps_against(DEPS_FAILED, 5000);
        EXPECT_ERRNO(dr.r, 0);
        EXPECT_FALSE(dr.ok);
        EXPECT_STR_EQ(dr.message, "No matching distribution found");
}

TEST(client_deps_update_failures)
{
        struct deps_run dr = deps_against(DEPS_WRONG_TYPE, 5000);
        EXPECT_ERRNO(dr.r, -EPROTO);
        EXPECT_STR_EQ(dr.message, "untouched");
        dr = deps_against(DEPS_DIE, 5000);
        EXPECT_ERRNO(dr.r, -ECONNRESET);
        int64_t t0 = mono_ms();
        dr = deps_against(DEPS_SILENT, 300);
        EXPECT_ERRNO(dr.r, -ETIMEDOUT);
        EXPECT_INT_OP(mono_ms() - t0, <, 3000);
}
