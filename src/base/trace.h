/* W3C trace context: parse an incoming `traceparent` header or make fresh
 * ids, so every log line of a request carries the same trace id. */
#pragma once

#include <stdbool.h>

#define TRACE_ID_LEN 32
#define SPAN_ID_LEN 16

struct trace {
        char trace_id[TRACE_ID_LEN + 1];
        char span_id[SPAN_ID_LEN + 1]; /* our own span for this request */
};

/* Accept "00-<32 hex>-<16 hex>-<2 hex>" (lower-case, ids not all zero);
 * keep its trace id and make a new span id. Otherwise make both. */
void trace_from_header(const char *traceparent, struct trace *ret);
/* "00-<trace>-<span>-01" for the response header; buf >= 56 bytes. */
void trace_format(const struct trace *t, char *buf, unsigned long size);
bool trace_parse(const char *traceparent, char ret_trace_id[TRACE_ID_LEN + 1]);
