/* The HTTP side of one run: make the pipes, hand them to the jailer with a
 * RUN message, feed the code, collect stdout/stderr up to the cap (asking
 * the jailer to KILL on overflow), and wait for its RESULT. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/outcome.h"

struct ipc_run_params {
        uint32_t language;
        bool network;
        const char *trace_id;
        const char *code;
        size_t code_len;
        const char *preload;
        size_t preload_len;
        size_t output_cap; /* stdout + stderr bytes kept */
        int deadline_ms;   /* give up on the jailer after this long */
};

/* 0 with *ret filled (its status may still be an error status); -errno
 * when the jailer could not be reached or broke the protocol. */
int ipc_run(int ctrl_fd, const struct ipc_run_params *p, struct run_outcome *ret);

/* Ask the jailer to install the dependency layer now and wait for the
 * outcome: 0 with *ret_ok and the message (pip's complaint) filled, or
 * -errno when the jailer could not be reached. */
int ipc_deps_update(int ctrl_fd, const char *trace_id, int deadline_ms, bool *ret_ok, char *message,
                    size_t size);
