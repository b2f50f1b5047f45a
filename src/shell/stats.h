/* Shell jobs' figures for /metrics and /ready, kept by the jailer in the
 * shared statistics page (ipc/stats.h, struct shell_figures): the jobs
 * table calls one hook per event (a status change, a limit met, a
 * snapshot's end), and the jailer's tick checks shell.home and the jobs
 * directory once a second. Without an attached page nothing is counted. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ipc/stats.h"

struct config;

/* Once, before shell_new: the page and the settings (kept). */
void shell_stats_attach(struct shared_stats *page, const struct config *cfg);
/* A job goes from status `from` to `to`. *started_ms is the job's own
 * (monotonic ms, 0 until it starts: set here); output: output.log's size
 * now. */
void shell_stats_status(uint32_t from, uint32_t to, int64_t *started_ms, uint64_t output);
void shell_stats_limit(enum stats_shell_limit which);
/* A job started: cold, or from its binding's spare. */
void shell_stats_start(bool spare);
/* A snapshot call's end (the snapshot routes' hook). */
void shell_stats_snapshot(enum stats_shell_snapshot route, bool ok);
/* Each second: shell.home mounted and writable, the jobs directory usable. */
void shell_stats_publish(void);
