/* The dependency layers on disk and the runs bound to them (layers.h). */
#include "deps/layers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "deps/deps.h"
#include "deps/deps_tree.h"

struct layer {
        struct layer *next;
        char *name; /* "layer-<ms>" under the layer directory */
        unsigned refs;
};

struct deps_layers {
        char *dir;
        int dirfd; /* the layer directory, root's: every tree below goes through it */
        uid_t uid; /* the installer's */
        gid_t gid;
        struct layer *layers, *current;
};

static char *layer_path(const struct deps_layers *ls, const char *name)
{
        char *p;
        return asprintf(&p, "%s/%s", ls->dir, name) < 0 ? NULL : p;
}

static int by_name(const void *a, const void *b)
{
        return strcasecmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                          json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

static void sort_by_name(json_t *arr)
{
        size_t n = json_array_size(arr);
        json_t **v = n ? calloc(n, sizeof(*v)) : NULL;
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                v[i] = json_incref(json_array_get(arr, i));
        qsort(v, n, sizeof(*v), by_name);
        json_array_clear(arr);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, v[i]);
        free(v);
}

/* The installed distributions, from the layer's own *.dist-info, by name. */
static json_t *scan_installed(const char *dir)
{
        json_t *arr = json_array();
        DIR *dd = opendir(dir);
        struct dirent *de;
        while (arr && dd && (de = readdir(dd))) {
                size_t n = strlen(de->d_name);
                if (n < 11 || strcmp(de->d_name + n - 10, ".dist-info") != 0)
                        continue;
                char path[4096], name[256], version[128];
                struct strbuf sb;
                struct stat st;
                if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
                        sizeof(path) ||
                    lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue; /* not through a symlink */
                if ((size_t)snprintf(path, sizeof(path), "%s/%s/METADATA", dir, de->d_name) >=
                        sizeof(path) ||
                    file_read(path, O_NOFOLLOW, 1 << 20, &sb) < 0) /* pip's files: untrusted */
                        continue;
                if (deps_parse_metadata(sb.data ? sb.data : "", name, sizeof(name), version,
                                        sizeof(version)) == 0)
                        json_array_append_new(
                            arr, json_pack("{s:s,s:s}", "name", name, "version", version));
                strbuf_free(&sb);
        }
        if (dd)
                closedir(dd);
        sort_by_name(arr);
        return arr;
}

json_t *deps_layers_installed(const struct deps_layers *ls, const char *name)
{
        _cleanup_free_ char *p = layer_path(ls, name);
        return p ? scan_installed(p) : NULL;
}

/* rel below the layer directory ("layer-1", "layer-1/.home"), through
 * descriptors only (deps_tree.h): the installer's account wrote it. */
void deps_layers_remove(const struct deps_layers *ls, const char *rel)
{
        int r = deps_tree_remove(ls->dirfd, rel);
        if (r < 0)
                log_warn(NULL, "deps.remove_failed", "path=%s/%s error=%s", log_q(ls->dir),
                         log_q(rel), log_q(strerror(-r)));
}

static struct layer *layer_new(struct deps_layers *ls, const char *name)
{
        struct layer *l = calloc(1, sizeof(*l));
        if (!l || !(l->name = strdup(name))) {
                free(l);
                return NULL;
        }
        l->next = ls->layers;
        ls->layers = l;
        return l;
}

/* Remove layers that are neither current nor bound by any run. */
static void collect(struct deps_layers *ls)
{
        for (struct layer **pp = &ls->layers; *pp;) {
                struct layer *l = *pp;
                if (l == ls->current || l->refs > 0) {
                        pp = &l->next;
                        continue;
                }
                deps_layers_remove(ls, l->name);
                *pp = l->next;
                free(l->name);
                free(l);
        }
}

const char *deps_layers_current(const struct deps_layers *ls)
{
        return ls->current ? ls->current->name : NULL;
}

int deps_layers_acquire(struct deps_layers *ls, struct layer **ret_layer, int *ret_fd)
{
        *ret_layer = NULL;
        *ret_fd = -1;
        if (!ls->current)
                return 0;
        /* A detached read-only copy of the layer's tree: the run attaches it
         * in its own mount namespace (a plain fd of our namespace's mount
         * cannot be bound from another one). */
        _cleanup_free_ char *p = layer_path(ls, ls->current->name);
        int fd =
            p ? (int)syscall(SYS_open_tree, AT_FDCWD, p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) : -1;
        /* not noexec: compiled extensions (numpy, ...) are mapped
         * executable; a run cannot execve anything anyway */
        struct mount_attr attr = {.attr_set =
                                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
        if (fd < 0 || syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                int e = errno;
                safe_close(fd);
                return -e;
        }
        ls->current->refs++;
        *ret_layer = ls->current;
        *ret_fd = fd;
        return 0;
}

bool deps_layers_is_current(const struct deps_layers *ls, const struct layer *l)
{
        return l == ls->current;
}

void deps_layers_release(struct deps_layers *ls, struct layer *l)
{
        if (!l)
                return;
        l->refs--;
        if (l->refs == 0 && l != ls->current)
                collect(ls);
}

int deps_layers_switch(struct deps_layers *ls, const char *name)
{
        char link[4096], tmp[4096];
        if ((size_t)snprintf(link, sizeof(link), "%s/current", ls->dir) >= sizeof(link) ||
            (size_t)snprintf(tmp, sizeof(tmp), "%s/current.tmp", ls->dir) >= sizeof(tmp))
                return -ENAMETOOLONG;
        struct layer *l = name ? layer_new(ls, name) : NULL;
        if (name && !l)
                return -ENOMEM;
        unlink(tmp);
        if (name && (symlink(name, tmp) < 0 || rename(tmp, link) < 0))
                return -errno;
        if (!name)
                unlink(link);
        ls->current = l;
        collect(ls);
        return 0;
}

int deps_layers_seal(struct deps_layers *ls, const char *name)
{
        char home[300];
        if ((size_t)snprintf(home, sizeof(home), "%s/.home", name) < sizeof(home))
                deps_layers_remove(ls, home);
        return deps_tree_seal(ls->dirfd, name, ls->uid);
}

/* layer-<ms>/ for pip's --target, and in it .home/ (pip's HOME, holding a
 * copy of the requirements: the file itself need not be readable by
 * the installer), both the installer's until the layer is sealed. */
int deps_layers_stage(struct deps_layers *ls, const char *text, size_t len, char **ret_path)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char name[64];
        snprintf(name, sizeof(name), "layer-%lld%03ld", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
        char *p = layer_path(ls, name);
        if (!p)
                return -ENOMEM;
        /* Everything is made while it is root's, then given away through
         * descriptors: the installer's account never has a moment in which
         * a swapped entry could turn one of these calls elsewhere. */
        int dir = -1, home = -1, fd = -1, r = 0;
        if (mkdirat(ls->dirfd, name, 0755) < 0 ||
            (dir = openat(ls->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            mkdirat(dir, ".home", 0700) < 0 ||
            (home = openat(dir, ".home", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            (fd = openat(home, "requirements.txt",
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
                r = -errno;
        if (r == 0)
                r = file_write_all(fd, text, len);
        if (r == 0 && (fchown(fd, ls->uid, ls->gid) < 0 || fchown(home, ls->uid, ls->gid) < 0 ||
                       fchown(dir, ls->uid, ls->gid) < 0))
                r = -errno;
        safe_close(fd);
        safe_close(home);
        safe_close(dir);
        if (r < 0) {
                deps_layers_remove(ls, name);
                free(p);
                return r;
        }
        *ret_path = p;
        return 0;
}

/* Adopt `current` from an earlier life; remove every other layer. */
static void adopt(struct deps_layers *ls)
{
        char link[4096], target[256];
        ssize_t n = -1;
        if ((size_t)snprintf(link, sizeof(link), "%s/current", ls->dir) < sizeof(link))
                n = readlink(link, target, sizeof(target) - 1);
        if (n > 0 && (target[n] = '\0', strncmp(target, "layer-", 6) == 0 && !strchr(target, '/')))
                ls->current = layer_new(ls, target);
        DIR *dd = opendir(ls->dir);
        struct dirent *de;
        while (dd && (de = readdir(dd)))
                if (strncmp(de->d_name, "layer-", 6) == 0 &&
                    !(ls->current && strcmp(de->d_name, ls->current->name) == 0))
                        deps_layers_remove(ls, de->d_name);
        if (dd)
                closedir(dd);
}

int deps_layers_open(const char *dir, uid_t installer, gid_t installer_gid,
                     struct deps_layers **ret, char *err, size_t errlen)
{
        struct deps_layers *ls = calloc(1, sizeof(*ls));
        if (!ls || !(ls->dir = strdup(dir))) {
                free(ls);
                return -ENOMEM;
        }
        ls->dirfd = -1;
        ls->uid = installer;
        ls->gid = installer_gid;
        /* mkdir -p, root's, readable by everyone (the HTTP process reads
         * status.json; runs get layers through binds), whoever made it:
         * another owner could swap layers */
        int r = file_mkdir_parents(ls->dir, 0);
        if (r == 0 && mkdir(ls->dir, 0755) < 0 && errno != EEXIST)
                r = -errno;
        if (r == 0 && (chown(ls->dir, 0, 0) < 0 || chmod(ls->dir, 0755) < 0 ||
                       (ls->dirfd = open(ls->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
                r = -errno;
        if (r < 0) {
                snprintf(err, errlen, "dependencies.layer_dir %s: %s", dir, strerror(-r));
                deps_layers_free(ls);
                return r;
        }
        adopt(ls);
        *ret = ls;
        return 0;
}

struct deps_layers *deps_layers_free(struct deps_layers *ls)
{
        if (!ls)
                return NULL;
        while (ls->layers) {
                struct layer *l = ls->layers;
                ls->layers = l->next;
                free(l->name);
                free(l);
        }
        safe_close(ls->dirfd);
        free(ls->dir);
        free(ls);
        return NULL;
}
