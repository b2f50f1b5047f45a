/* The dependency layer's pure text helpers (declared in deps.h): no
 * state, no I/O, so the unit tests and the libFuzzer target
 * tests/fuzz/fuzz_deps.c link this file alone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "deps/deps.h"

uint64_t deps_hash(const char *data, size_t len, uint64_t h)
{
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)data[i]) * 0x100000001b3ULL;
        return h;
}

bool deps_requirements_empty(const char *text, size_t len)
{
        for (size_t i = 0; i < len;) {
                size_t e = i;
                while (e < len && text[e] != '\n')
                        e++;
                size_t k = i;
                while (k < e && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r'))
                        k++;
                if (k < e && text[k] != '#')
                        return false;
                i = e + 1;
        }
        return true;
}

int deps_parse_metadata(const char *text, char *name, size_t nlen, char *version, size_t vlen)
{
        name[0] = version[0] = '\0';
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                if (*l == '\n' || (l[0] == '\r' && l[1] == '\n'))
                        break; /* the headers end at the first blank line */
                size_t n = strcspn(l, "\r\n");
                if (!name[0] && strncmp(l, "Name: ", 6) == 0)
                        snprintf(name, nlen, "%.*s", (int)(n - 6), l + 6);
                else if (!version[0] && strncmp(l, "Version: ", 9) == 0)
                        snprintf(version, vlen, "%.*s", (int)(n - 9), l + 9);
        }
        return name[0] && version[0] ? 0 : -EINVAL;
}
