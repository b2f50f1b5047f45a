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

/* The same, keeping the channel open for a call that answers twice (the
 * snapshot calls, shell_proto.h): on success *ret_chan is the channel,
 * which the caller closes (closing it early tells the jailer the call is
 * abandoned). */
int ipc_shell_open(int ctrl_fd, const char *trace_id, const struct shell_req *req, const char *blob,
                   size_t blob_len, int deadline_ms, int cancel_fd, struct shell_reply *ret,
                   int *ret_fd, int *ret_chan);
/* The next reply on an open channel (an attached fd is closed): 0 with
 * *ret, -ETIMEDOUT, -ECANCELED, -ECONNRESET (the jailer closed it) or
 * another -errno. */
int ipc_shell_next(int chan, int deadline_ms, int cancel_fd, struct shell_reply *ret);
