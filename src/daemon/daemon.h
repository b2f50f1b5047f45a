/* Process set-up of lockboxd: start-up checks, the listening socket, the
 * split into the unprivileged HTTP process and the root jailer, and the
 * exit code of the whole. */
#pragma once

#include <stddef.h>

struct config;

/* Runs the service until it stops; returns the exit code. On a start-up
 * failure err holds one clear line. */
int daemon_main(const struct config *cfg, char *err, size_t errlen);
/* The capabilities lockboxd requires at start, in the order it names
 * missing ones: the i-th's name ("CAP_SYS_ADMIN"), or NULL past the last.
 * docs/DEPLOY.md lists them (tests/unit/test_docs.c keeps it true). */
const char *daemon_needed_cap(size_t i);
