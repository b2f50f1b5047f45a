/* src/deps/: the Python dependency layer, installed by pip and managed by
 * the jailer (see deps.c); runs bind it (jailer/run.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct jailer;
struct layer;

int deps_init(struct jailer *j, char *err, size_t errlen);
void deps_free(struct jailer *j);
/* Start the first install, the interval re-check, the install time limit. */
void deps_on_tick(struct jailer *j);
bool deps_owns(const struct jailer *j, pid_t pid); /* the running pip's process */
/* An update asked over HTTP: install now; chan gets DEPS_DONE after. */
void deps_request(struct jailer *j, int chan);
/* The current layer for a new Python run: a detached read-only mount of
 * it (open_tree; -1: none) and a reference, dropped with
 * deps_layer_release(). */
int deps_layer_acquire(struct jailer *j, struct layer **ret_layer, int *ret_fd);
void deps_layer_release(struct jailer *j, struct layer *l);
bool deps_layer_is_current(const struct jailer *j, const struct layer *l);

/* Pure helpers (unit-tested). */
uint64_t deps_hash(const char *data, size_t len, uint64_t h);
bool deps_requirements_empty(const char *text, size_t len);
int deps_parse_metadata(const char *text, char *name, size_t nlen, char *version, size_t vlen);
