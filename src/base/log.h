/* One-line-per-event logging in logfmt: time, level, process role, trace
 * id, event name, then key=value pairs. Lines are written with a single
 * write(2) so processes and threads never interleave inside a line.
 * Never pass user code or program output to these functions. */
#pragma once

#include <stdbool.h>

#include "base/util.h"

enum log_level { LOGL_DEBUG, LOGL_INFO, LOGL_WARN, LOGL_ERROR };

/* role: "main", "jailer", "http"...; file_fd: extra sink or -1. */
void log_setup(const char *role, bool debug, int file_fd);
void log_set_role(const char *role);
int log_get_file_fd(void);
void log_emit(enum log_level lvl, const char *trace_id, const char *event, const char *fmt, ...)
        _printf_(4, 5);
/* Quote a value for logfmt; returns one of a few thread-local buffers. */
const char *log_q(const char *value);

#define log_debug(trace, event, ...) log_emit(LOGL_DEBUG, trace, event, __VA_ARGS__)
#define log_info(trace, event, ...) log_emit(LOGL_INFO, trace, event, __VA_ARGS__)
#define log_warn(trace, event, ...) log_emit(LOGL_WARN, trace, event, __VA_ARGS__)
#define log_error(trace, event, ...) log_emit(LOGL_ERROR, trace, event, __VA_ARGS__)
