/* Prometheus metrics of the HTTP process (docs/API.md, "GET /metrics"):
 * counters and histograms kept with atomics by the connection threads,
 * plus the jailer's shared figures and the processes' resident memory,
 * rendered in the text exposition format on demand. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct shared_stats;

enum metrics_outcome {
        OUTCOME_OK,
        OUTCOME_RUNTIME_ERROR,
        OUTCOME_TIMEOUT,
        OUTCOME_SYSCALL_DENIED,
        OUTCOME_MEMORY_LIMIT,
        OUTCOME_OUTPUT_LIMIT,
        OUTCOME_ERROR, /* no verdict: the sandbox could not run it (-500, -429, ...) */
        OUTCOME_COUNT,
};

/* Once, before the server starts: where the jailer's figures are (memory
 * figures included), and the layer directory holding status.json. */
void metrics_init(const struct shared_stats *shared, const char *layer_dir);

/* route: the matched route's path, or NULL for anything else. */
void metrics_request(const char *route, unsigned status);
/* One run handed to the jailer. lang: enum proto_language; the outcome's
 * name as result_status_name() gives it ("ok", "timeout", ...) or NULL for
 * no verdict; the denied syscall's name, if any. */
void metrics_run(int lang, const char *status, const char *syscall, bool warm, uint64_t queue_us,
                 uint64_t run_us);
/* A connection refused because a sandbox run opened it. */
void metrics_refused_run_connection(void);
/* A connection closed for sending its headers (or its body) too slowly. */
void metrics_deadline_missed(bool body);
struct dns_relay;
/* The runs' DNS relay whose counters /metrics shows (lockbox_dns_*), or
 * NULL: set before the server starts, cleared before the relay stops. */
void metrics_set_dns_relay(const struct dns_relay *relay);
/* Runs waiting for a worker slot. */
void metrics_queued(int delta);

/* The exposition text (malloc'd), or NULL when out of memory. in_flight:
 * run requests accepted and not yet answered. */
char *metrics_render(int in_flight);

/* For unit tests: the outcome for a status name. */
enum metrics_outcome metrics_outcome_of(const char *status);
