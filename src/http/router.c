/* Route tables and their matching (see router.h). A path matches a
 * pattern segment by segment, "{id}" taking any one non-empty segment;
 * the first route whose path and method match wins, so literal routes go
 * before patterns that would also take their path. */
#include "http/router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static bool path_match(const char *pattern, const char *path, size_t *ret_off, size_t *ret_len)
{
        const char *p = pattern, *s = path;
        size_t off = 0, len = 0;
        while (*p && *s) {
                if (strncmp(p, "{id}", 4) == 0) {
                        size_t n = strcspn(s, "/");
                        if (n == 0)
                                return false;
                        off = (size_t)(s - path);
                        len = n;
                        p += 4;
                        s += n;
                        continue;
                }
                if (*p++ != *s++)
                        return false;
        }
        if (*p || *s)
                return false;
        *ret_off = off;
        *ret_len = len;
        return true;
}

static bool method_match(const struct route_table *t, const struct route *r, const char *method)
{
        return strcmp(r->method, method) == 0 ||
               (t->head_as_get && strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0);
}

static int compare_names(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The methods in names[0..n) sorted, once each, ", "-separated. */
static void allow_format(const char **names, size_t n, char *buf, size_t size)
{
        qsort(names, n, sizeof(*names), compare_names);
        size_t at = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
                        continue;
                int w = snprintf(buf + at, size - at, "%s%s", at ? ", " : "", names[i]);
                if (w < 0 || (size_t)w >= size - at)
                        return; /* cannot happen with the tables' few methods */
                at += (size_t)w;
        }
}

void router_find(const struct route_table *t, const char *method, const char *path,
                 bool (*visible)(const struct route *r, const void *ctx), const void *ctx,
                 struct route_match *ret)
{
        const char *names[16];
        size_t n_names = 0;
        *ret = (struct route_match){0};
        for (size_t i = 0; i < t->n_routes; i++) {
                const struct route *r = &t->routes[i];
                size_t off, len;
                if ((visible && !visible(r, ctx)) || !path_match(r->path, path, &off, &len))
                        continue;
                ret->path_known = true;
                if (n_names + 2 <= ELEMENTSOF(names)) {
                        names[n_names++] = r->method;
                        if (t->head_as_get && strcmp(r->method, "GET") == 0)
                                names[n_names++] = "HEAD";
                }
                if (!ret->route && method_match(t, r, method)) {
                        ret->route = r;
                        ret->id_off = off;
                        ret->id_len = len;
                }
        }
        allow_format(names, n_names, ret->allow, sizeof(ret->allow));
}

bool router_key_matches(const char *given, const char *key)
{
        size_t gl = given ? strlen(given) : 0, kl = strlen(key);
        unsigned char diff = gl != kl;
        for (size_t i = 0; i < kl; i++)
                diff |= (unsigned char)((i < gl ? given[i] : 0) ^ key[i]);
        return given && diff == 0;
}
