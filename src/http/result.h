/* Building the JSON bodies lockbox sends: the reference's envelope
 * {"code","message","data"} and the run result with its "error" text.
 * All functions return a malloc'd NUL-terminated JSON string or NULL on
 * allocation failure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/utf8.h" /* utf8_sanitize(), declared there */
#include "ipc/outcome.h"

/* {"code":code,"message":message,"data":null} */
char *result_error_json(int code, const char *message);
/* {"code":0,"message":"success","data":{...}} for a finished run; for a
 * non-DONE status, the matching error envelope (-429, -503, -500).
 * stderr_is_error is compat.stderr_is_error (see result_error_text). */
char *result_run_json(const struct run_outcome *o, bool stderr_is_error);
/* The "error" field: "" when exit_code is 0 and no reason (the program's
 * stderr instead when stderr_is_error), else "process exited with code N",
 * "\n" + reason line, "\n"-joined stderr. */
char *result_error_text(const struct run_outcome *o, bool stderr_is_error);
/* The reason line ("error: timeout", ...) or NULL for REASON_NONE. */
char *result_reason_text(const struct proto_result *r);
/* "ok", "runtime_error", "timeout", "syscall_denied", "memory_limit",
 * "output_limit". */
const char *result_status_name(const struct proto_result *r);
