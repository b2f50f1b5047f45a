/* Requirements listing (see deps.h). "name==1.2" gives version "1.2";
 * any other specifier is kept as written (">=2,<3"); no specifier gives "". */
#include "http/deps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"

static json_t *parse_line(char *line)
{
        line[strcspn(line, "#")] = '\0';
        char *s = line + strspn(line, " \t\r");
        size_t n = strlen(s);
        while (n && strchr(" \t\r", s[n - 1]))
                s[--n] = '\0';
        if (!*s || *s == '-')
                return NULL; /* blank, comment, or an option like -r / --index-url */
        s[strcspn(s, ";")] = '\0'; /* environment markers */
        size_t name_len = strcspn(s, "=<>!~[ (@\t");
        char *spec = s + name_len;
        if (*spec == '[')
                spec += strcspn(spec, "]") + (spec[strcspn(spec, "]")] ? 1 : 0);
        spec += strspn(spec, " \t");
        if (strncmp(spec, "==", 2) == 0 && spec[2] != '=')
                spec += 2;
        size_t sl = strlen(spec);
        while (sl && strchr(" \t", spec[sl - 1]))
                sl--;
        return json_pack("{s:s%,s:s%}", "name", s, name_len, "version", spec, sl);
}

json_t *deps_parse_requirements(const char *text, size_t len)
{
        json_t *arr = json_array();
        _cleanup_free_ char *copy = strndup(text, len);
        if (!arr || !copy) {
                json_decref(arr);
                return NULL;
        }
        for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                json_t *o = parse_line(l);
                if (o)
                        json_array_append_new(arr, o);
        }
        return arr;
}

int deps_list_requirements(const char *path, json_t **ret, char *err, size_t errlen)
{
        FILE *f = fopen(path, "re");
        if (!f && errno == ENOENT) {
                *ret = json_array();
                return *ret ? 0 : -ENOMEM;
        }
        if (!f) {
                int e = errno;
                snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
                return -e;
        }
        struct strbuf sb;
        strbuf_init(&sb, 1 << 20);
        char buf[4096];
        size_t n;
        int r = 0;
        while (r == 0 && (n = fread(buf, 1, sizeof(buf), f)) > 0)
                r = strbuf_append(&sb, buf, n);
        fclose(f);
        json_t *arr = r == 0 ? deps_parse_requirements(sb.data ? sb.data : "", sb.len) : NULL;
        strbuf_free(&sb);
        if (!arr) {
                snprintf(err, errlen, "cannot read %s: %s", path,
                         r == -E2BIG ? "file larger than 1 MiB" : "out of memory");
                return r < 0 ? r : -ENOMEM;
        }
        *ret = arr;
        return 0;
}
