/* One-line-per-event logging: time, level, process role, trace id, event
 * name, then key=value pairs, as logfmt or (log_set_json) as one JSON
 * object per line with the same keys. Callers always format logfmt
 * (values bare or quoted with log_q); the JSON form is derived from it.
 * Lines are written with a single write(2) per sink so processes and
 * threads never interleave inside a line. Never pass user code, program
 * output or the API key to these functions. */
#pragma once

#include <stdbool.h>

#include "base/util.h"

enum log_level { LOGL_DEBUG, LOGL_INFO, LOGL_WARN, LOGL_ERROR };

/* role: "main", "jailer", "http"...; file_fd: extra sink or -1. */
void log_setup(const char *role, bool debug, int file_fd);
void log_set_role(const char *role);
void log_set_json(bool json);
int log_get_file_fd(void);
/* Open (append, create 0640) the file sink, remembering its path. */
int log_open_file(const char *path);
/* Reopen the remembered path onto the same fd number (log rotation):
 * 0, or -errno with the old file still in use. */
int log_reopen_file(void);
/* Make fd the file sink (an fd received from the process that reopened
 * the file); fd is consumed. */
void log_replace_file(int fd);
/* The JSON line for a logfmt line (without its newline), into out,
 * NUL-terminated; a line too long for out loses its last pairs whole, so
 * the text is always one JSON object ("" when outlen < 3). Returns the
 * length written. */
size_t log_logfmt_to_json(const char *line, size_t len, char *out, size_t outlen);
void log_emit(enum log_level lvl, const char *trace_id, const char *event, const char *fmt, ...)
    _printf_(4, 5);
/* Quote a value for logfmt; returns one of a few thread-local buffers. */
const char *log_q(const char *value);

#define log_debug(trace, event, ...) log_emit(LOGL_DEBUG, trace, event, __VA_ARGS__)
#define log_info(trace, event, ...) log_emit(LOGL_INFO, trace, event, __VA_ARGS__)
#define log_warn(trace, event, ...) log_emit(LOGL_WARN, trace, event, __VA_ARGS__)
#define log_error(trace, event, ...) log_emit(LOGL_ERROR, trace, event, __VA_ARGS__)
