/* status.json in the layer directory: what the jailer knows of the
 * dependency layer (the last install, the packages of the current layer,
 * what it was built from), written after every change for the HTTP
 * process, which serves the dependency routes and /ready from it, and
 * read back at start-up to adopt an earlier life's layer. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct deps_status {
        bool attempted;      /* an install finished (or had nothing to do) */
        bool installing;     /* pip runs */
        bool ok;             /* the last one succeeded */
        time_t time;         /* when it ended; 0: not yet */
        const char *message; /* why it failed, "" */
        json_t *installed;   /* [{"name", "version"}] of the current layer */
        const char *layer;   /* the current layer's name, NULL: none */
        bool have_hash;      /* hash is known */
        uint64_t hash;       /* of what the current layer was built from */
};

/* Replaces path atomically (a temporary file renamed over it), mode 0644.
 * 0 or -errno. */
int deps_status_write(const char *path, const struct deps_status *s);
/* The hash path records, if it is about layer (NULL: about no layer):
 * true and *ret, else false. */
bool deps_status_hash(const char *path, const char *layer, uint64_t *ret);
