/* status.json of the dependency layer (status.h). */
#include "deps/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int deps_status_write(const char *path, const struct deps_status *s)
{
        char when[32] = "", hash[24] = "", tmp[4096];
        struct tm tm;
        if (s->time && gmtime_r(&s->time, &tm))
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (s->have_hash)
                snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)s->hash);
        json_t *st = json_pack("{s:b,s:b,s:s,s:s,s:s,s:O,s:s?,s:s}", "ready", s->attempted,
                               "installing", s->installing, "status",
                               !s->attempted ? "pending"
                               : s->ok       ? "ok"
                                             : "failed",
                               "time", when, "message", s->message, "dependencies", s->installed,
                               "layer", s->layer, "hash", hash);
        int r = 0;
        if (!st)
                r = -ENOMEM;
        else if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
                r = -ENAMETOOLONG;
        else if (json_dump_file(st, tmp, JSON_COMPACT) < 0)
                r = -EIO;
        else if (chmod(tmp, 0644) < 0 || rename(tmp, path) < 0)
                r = -errno;
        json_decref(st);
        return r;
}

bool deps_status_hash(const char *path, const char *layer, uint64_t *ret)
{
        json_t *st = json_load_file(path, 0, NULL);
        const char *was = NULL, *hash = NULL;
        bool found = false;
        if (json_unpack(st, "{s?s,s:s}", "layer", &was, "hash", &hash) == 0 && strlen(hash) == 16 &&
            ((!was && !layer) || (was && layer && strcmp(was, layer) == 0))) {
                char *end;
                unsigned long long h = strtoull(hash, &end, 16);
                if (*end == '\0') {
                        *ret = h;
                        found = true;
                }
        }
        json_decref(st);
        return found;
}
