/* src/deps/: the Python dependency layer, installed by pip and managed by
 * the jailer (see deps.c); runs bind it (jailer/run.c). Its state is
 * private to deps.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct config;
struct deps;
struct layer;
struct loop;

/* The layer directory (dependencies.layer_dir) made root's, or an earlier
 * life's adopted; its installs watched in loop. err gets one clear line. */
int deps_new(const struct config *cfg, struct loop *loop, struct deps **ret, char *err,
             size_t errlen);
/* Stops a running install (its reaper kills pip), removes its staging. */
struct deps *deps_free(struct deps *d);
/* fn(data) is called each time the current layer changes: runs armed with
 * the old one are stale (jailer.c drains the Python pools). */
void deps_on_layer_switched(struct deps *d, void (*fn)(void *data), void *data);
/* Start the first install, the interval re-check, the install time limit
 * (not while the jailer stops). */
void deps_on_tick(struct deps *d);
bool deps_owns(const struct deps *d, pid_t pid); /* the running pip's process */
/* An update asked over HTTP: install now; chan gets DEPS_DONE after. */
void deps_request(struct deps *d, int chan);
/* The current layer for a new Python run: a detached read-only mount of
 * it (open_tree; -1: none) and a reference, dropped with
 * deps_layer_release(). d may be NULL (no layer). */
int deps_layer_acquire(struct deps *d, struct layer **ret_layer, int *ret_fd);
void deps_layer_release(struct deps *d, struct layer *l);
bool deps_layer_is_current(const struct deps *d, const struct layer *l);

/* Pure helpers (unit-tested). */
uint64_t deps_hash(const char *data, size_t len, uint64_t h);
bool deps_requirements_empty(const char *text, size_t len);
int deps_parse_metadata(const char *text, char *name, size_t nlen, char *version, size_t vlen);
