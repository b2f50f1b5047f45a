/* Messages between the unprivileged HTTP process and the root jailer.
 * The jailer serves a closed menu: RUN (on the control socket, with the
 * run's own channel attached) and KILL (on that channel). On the channel it
 * answers STARTED, with the run's three pipe ends, once a jailed process is
 * waiting for the code (a warm one at once, a cold one after its start),
 * and one RESULT when the run is over (or instead of STARTED when it is
 * refused). Anything else, or a malformed message, is dropped. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define PROTO_MAGIC 0x6c6b6278u /* "lkbx" */
#define PROTO_TRACE_LEN 32      /* hex chars of a W3C trace id */

enum proto_type {
        PROTO_RUN = 1,
        PROTO_KILL = 2,
        PROTO_RESULT = 3,
        PROTO_STARTED = 4,
        PROTO_DEPS = 5,        /* HTTP -> jailer: install the dependency layer now */
        PROTO_DEPS_DONE = 6,   /* jailer -> HTTP on the channel: how it went */
        PROTO_SHELL = 7,       /* HTTP -> jailer: a shell-job call (ipc/shell_proto.h) */
        PROTO_SHELL_REQ = 8,   /* HTTP -> jailer on the call's channel */
        PROTO_SHELL_REPLY = 9, /* jailer -> HTTP on the call's channel */
};

enum proto_language {
        LANG_PYTHON3 = 1,
        LANG_NODEJS = 2,
};
/* Tables indexed by enum proto_language (0 is no language). */
#define PROTO_LANG_SLOTS (LANG_NODEJS + 1)

/* Why the sandbox ended a run; NONE when the program ended by itself. */
enum run_reason {
        REASON_NONE = 0,
        REASON_TIMEOUT,
        REASON_SYSCALL,
        REASON_MEMORY,
        REASON_OUTPUT,
        REASON_CPU,
        REASON_SIGNAL, /* died of a signal the sandbox did not send */
};

/* Outcome of the request as a whole, mapped to the envelope's code. */
enum run_status {
        RUN_STATUS_DONE = 0,        /* ran; code 0 */
        RUN_STATUS_NO_IDENTITY = 1, /* UID pool exhausted; code -429 */
        RUN_STATUS_BUSY = 2,        /* jailer at capacity; code -503 */
        RUN_STATUS_INTERNAL = 3,    /* jail set-up failed; code -500 */
};

struct proto_header {
        uint32_t magic;
        uint32_t type;
};

/* HTTP -> jailer, with the run's channel (SEQPACKET) attached. */
struct proto_run {
        struct proto_header hdr;
        uint32_t language;
        uint32_t network; /* 0/1, already clamped by the server config */
        char trace_id[PROTO_TRACE_LEN + 1];
};

/* HTTP -> jailer on the control socket, with a channel attached. */
struct proto_deps {
        struct proto_header hdr;
        char trace_id[PROTO_TRACE_LEN + 1];
};

struct proto_deps_done {
        struct proto_header hdr;
        uint32_t ok;
        char message[1024]; /* pip's complaint when not ok */
};

/* jailer -> HTTP on the run channel, with fds [code pipe write end, stdout
 * read end, stderr read end] attached. The code pipe takes an 8-byte
 * little-endian preload length, the preload, then the code; closing it
 * starts the program. */
struct proto_started {
        struct proto_header hdr;
        uint32_t warm; /* 1: the process was waiting in a pool */
};

/* jailer -> HTTP on the run channel, sent once the program has ended: at
 * its exit report (what is left of the run is SIGKILLed then, and its UID,
 * cgroup and layer stay held until it is reaped), else when its process is
 * gone. */
struct proto_result {
        struct proto_header hdr;
        uint32_t status; /* enum run_status */
        int32_t exit_code;
        uint32_t reason; /* enum run_reason */
        int32_t signal;
        int32_t syscall_nr;
        char syscall_name[48];
        uint64_t wall_us;
        uint64_t cpu_us;
        uint64_t memory_peak;
        char message[200]; /* for INTERNAL: which jail step failed and why */
};
