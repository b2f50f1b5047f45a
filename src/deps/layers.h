/* The life of a dependency layer: the layer directory (root's), the
 * staging directory pip fills as the installer's account, the sealed
 * layers under it (layer-<ms>), the one `current` points to, and the runs
 * bound to each. A layer that is neither current nor bound by a run is
 * removed. Every tree the installer wrote is handled through descriptors
 * (deps_tree.h). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct deps_layers;
struct layer;

/* dir made (mkdir -p) root's and 0755, the `current` of an earlier life
 * adopted and every other layer-* in it removed. err gets one clear line.
 * 0 or -errno. */
int deps_layers_open(const char *dir, uid_t installer, gid_t installer_gid,
                     struct deps_layers **ret, char *err, size_t errlen);
struct deps_layers *deps_layers_free(struct deps_layers *ls);
/* The current layer's name, NULL: none. */
const char *deps_layers_current(const struct deps_layers *ls);
/* The installed distributions of layer name, [{"name", "version"}] by
 * name, read from its *.dist-info (pip's files: untrusted). */
json_t *deps_layers_installed(const struct deps_layers *ls, const char *name);

/* A new staging directory, layer-<ms>/, with .home/requirements.txt
 * holding text, both the installer's: its absolute path (malloc'd). */
int deps_layers_stage(struct deps_layers *ls, const char *text, size_t len, char **ret_path);
/* The finished staging directory name sealed (root's, read-only) without
 * its .home: 0 or -errno (then remove it). */
int deps_layers_seal(struct deps_layers *ls, const char *name);
/* name (NULL: no layer) becomes current, through an atomic rename of the
 * `current` symlink; layers no run holds are removed. 0 or -errno. */
int deps_layers_switch(struct deps_layers *ls, const char *name);
/* Removes layer or staging directory name, logging a failure. */
void deps_layers_remove(const struct deps_layers *ls, const char *name);

/* The current layer for a new run: a detached read-only mount of it
 * (open_tree; -1 and NULL: none) and a reference, dropped with
 * deps_layers_release(). */
int deps_layers_acquire(struct deps_layers *ls, struct layer **ret_layer, int *ret_fd);
void deps_layers_release(struct deps_layers *ls, struct layer *l);
bool deps_layers_is_current(const struct deps_layers *ls, const struct layer *l);
