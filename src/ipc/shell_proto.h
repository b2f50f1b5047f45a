/* Messages between the HTTP process and the jailer for shell jobs (Dify's
 * shellctl API). The HTTP process decodes and validates the JSON; the
 * jailer owns the jobs. One exchange per API call:
 *
 *   HTTP -> jailer, control socket: PROTO_SHELL (struct proto_shell) with
 *           the call's channel (SEQPACKET) attached;
 *   HTTP -> jailer, channel: one struct shell_req, for SHELL_RUN and
 *           SHELL_INPUT with a memfd attached holding the call's text (a
 *           shell blob, below);
 *   jailer -> HTTP, channel: one struct shell_reply, when the call is
 *           answered (a wait may take up to its timeout), with the job's
 *           output.log (read-only) attached when the reply carries a
 *           window, or for SHELL_LIST a memfd of n_jobs struct shell_view.
 *
 * Every number here was already bounded by the HTTP side; the jailer
 * checks them again and refuses a request that breaks a bound.
 *
 * The two snapshot calls answer twice on their channel. SHELL_SNAPSHOT_SAVE
 * (a blob of SHELL_BLOB_EXCLUDE records attached when the body named
 * some): the first reply, 200 with the read end of a pipe attached, or
 * the error; the tar+zstd stream of HOME comes on the pipe until the
 * worker closes it; then the second reply, 200 with snap_entries and
 * snap_bytes (the archive's size, which must equal what came on the
 * pipe), or the error that cut the stream. SHELL_SNAPSHOT_RESTORE: the
 * first reply, 200 with the write end of a pipe attached (or the error);
 * the HTTP side writes the archive into it and closes it; the second
 * reply, 200 with snap_entries and snap_bytes (file bytes written), or the
 * error. The worker that reads or writes HOME is the jailer's child
 * (shell/snapshot.c), never the HTTP process nor the jailer. */
#pragma once

#include <stdarg.h>

#include <stddef.h>
#include <stdint.h>

#include "ipc/proto.h"

#define SHELL_JOB_ID_LEN 16      /* lowercase hex */
#define SHELL_SESSION_ID_MAX 128 /* [A-Za-z0-9_-]{1,128} */
#define SHELL_OUTPUT_LIMIT_DEFAULT 16384
#define SHELL_OUTPUT_LIMIT_MAX (1 << 20) /* run/wait/input windows (the SDK's bound) */
#define SHELL_TAIL_LIMIT_MAX 524288      /* log/tail, as the reference */
#define SHELL_WAIT_MAX_MS (600 * 1000)   /* longest a call waits */
#define SHELL_IDLE_FLUSH_MAX_MS (30 * 1000)
#define SHELL_GRACE_MAX_MS (600 * 1000)
#define SHELL_TERMINAL_MAX 4096
#define SHELL_LIST_MAX 200
#define SHELL_BLOB_MAX (64u << 20) /* script, cwd and env together */

enum shell_op {
        SHELL_RUN = 1,
        SHELL_WAIT = 2,
        SHELL_INPUT = 3,
        SHELL_TAIL = 4,
        SHELL_STATUS = 5, /* GET /v1/jobs/{id} */
        SHELL_LIST = 6,
        SHELL_TERMINATE = 7,
        SHELL_DELETE = 8,
        SHELL_SNAPSHOT_SAVE = 9,
        SHELL_SNAPSHOT_RESTORE = 10,
};
#define SHELL_OP_LAST SHELL_SNAPSHOT_RESTORE
#define SHELL_SNAPSHOT_BODY_MAX 65536 /* a save's options body, as the reference */

enum shell_mode { SHELL_MODE_PTY = 0, SHELL_MODE_STDIO = 1 };

/* The seven statuses of the reference; the last four are terminal. */
enum shell_status {
        SHELL_CREATED = 0,
        SHELL_STARTING,
        SHELL_RUNNING,
        SHELL_EXITED,
        SHELL_TERMINATED,
        SHELL_FAILED,
        SHELL_LOST,
};
#define SHELL_STATUS_TERMINAL(s) ((s) >= SHELL_EXITED)

struct proto_shell {
        struct proto_header hdr; /* PROTO_SHELL */
        char trace_id[PROTO_TRACE_LEN + 1];
};

struct shell_req {
        struct proto_header hdr; /* PROTO_SHELL_REQ */
        uint32_t op;             /* enum shell_op */
        char job_id[SHELL_JOB_ID_LEN + 1];
        /* run */
        uint32_t mode; /* enum shell_mode */
        uint32_t cols, rows;
        char session_id[SHELL_SESSION_ID_MAX + 1]; /* "" when not sent */
        /* run, wait, input: the window and how long to wait */
        int64_t offset;         /* >= 0 */
        uint32_t output_limit;  /* 1..SHELL_OUTPUT_LIMIT_MAX (tail: ..SHELL_TAIL_LIMIT_MAX) */
        uint32_t timeout_ms;    /* 0: answer at once */
        uint32_t idle_flush_ms; /* 1..SHELL_IDLE_FLUSH_MAX_MS */
        /* terminate, delete */
        uint32_t grace_ms;
        uint32_t force;
        /* list */
        uint32_t list_limit;   /* 1..SHELL_LIST_MAX */
        int32_t status_filter; /* enum shell_status, -1: any, -2: a name that matches nothing */
};

/* A job as the API shows it. Times are Unix seconds, -1 when unset. */
struct shell_view {
        char job_id[SHELL_JOB_ID_LEN + 1];
        uint32_t status; /* enum shell_status */
        uint32_t has_exit_code;
        int32_t exit_code;
        int64_t created_at, started_at, ended_at;
        uint64_t size; /* bytes in output.log */
};

struct shell_reply {
        struct proto_header hdr; /* PROTO_SHELL_REPLY */
        uint32_t http_status;    /* 200, or the error's */
        char code[40];           /* error code ("job_not_found"), "" on success */
        char message[512];       /* error message */
        struct shell_view view;
        /* run, wait, input, tail: output.log[win_start, win_end) is the
         * window (valid UTF-8), its fd attached when it is not empty */
        uint64_t win_start, win_end;
        uint32_t truncated;
        uint32_t n_jobs; /* list: struct shell_view entries in the attached memfd */
        /* snapshot calls, second reply: entries in the archive; bytes of the
         * archive (save) or of file data written (restore) */
        uint64_t snap_entries, snap_bytes;
};

/* The text of a run or an input: a blob of tagged records (tag, length,
 * bytes; lengths little-endian uint32), at most SHELL_BLOB_MAX bytes. */
enum shell_blob_tag {
        SHELL_BLOB_SCRIPT = 1,  /* run: once, not empty */
        SHELL_BLOB_CWD = 2,     /* run: at most once; absent = the default HOME */
        SHELL_BLOB_ENV = 3,     /* run: "NAME\0VALUE", any number */
        SHELL_BLOB_TEXT = 4,    /* input: once */
        SHELL_BLOB_EXCLUDE = 5, /* snapshot save: one gitignore pattern each, any number */
};

struct shell_blob_item {
        uint32_t tag;
        const char *data;
        uint32_t len;
};

/* Append one record to *buf (grown with realloc). 0 or -ENOMEM/-E2BIG. */
int shell_blob_add(char **buf, size_t *len, uint32_t tag, const void *data, size_t n);
/* Walk a blob: the next record at *pos into *ret (1), 0 at the end, or
 * -EBADMSG for a truncated record or an unknown tag. */
int shell_blob_next(const char *buf, size_t len, size_t *pos, struct shell_blob_item *ret);

/* Status names as the API spells them; -1 for an unknown name. */
const char *shell_status_name(uint32_t status);
int shell_status_parse(const char *name);

/* The jailer's answer to a call, on the call's channel: the header set,
 * http_status 200 unless given, fd attached unless -1. */
void shell_reply_send(int chan, struct shell_reply *rep, int fd);
/* An error answer: status, code and the formatted message. */
void shell_reply_verror(int chan, unsigned status, const char *code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
