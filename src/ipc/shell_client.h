/* The HTTP side of one shell-job call (ipc/shell_proto.h): a channel of
 * its own announced to the jailer with PROTO_SHELL, the request on it
 * (its text in a sealed memfd), and the one reply, waited for with a
 * deadline. */
#pragma once

#include <stddef.h>

#include "ipc/shell_proto.h"

/* Send req over a new channel announced on ctrl_fd (trace_id: the
 * request's, or NULL), with blob (blob_len bytes, when not NULL) attached
 * in a memfd sealed against writing, growing and shrinking; wait up to
 * deadline_ms for the reply, or until cancel_fd (-1: none) is readable.
 * 0 with *ret (its strings NUL-terminated) and *ret_fd (the attached
 * descriptor, which the caller closes, or -1); -ECANCELED, -ETIMEDOUT, or
 * another -errno when the jailer could not be reached or broke the
 * protocol (nothing is returned then). */
int ipc_shell_call(int ctrl_fd, const char *trace_id, const struct shell_req *req, const char *blob,
                   size_t blob_len, int deadline_ms, int cancel_fd, struct shell_reply *ret,
                   int *ret_fd);
