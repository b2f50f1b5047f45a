/* libFuzzer target for the snapshot's exclude patterns (src/shell/
 * exclude.c). Input: patterns, one a line, then a NUL byte, then a path
 * (cut at its first NUL). Properties: every pattern set builds; a match
 * answers 1, 0 or -E2BIG (never a crash, never unbounded time); "**"
 * matches every path; a pattern of plain characters matches itself; a
 * pattern and its negation after it never exclude. */
#include <errno.h>

#include "fuzz.h"
#include "shell/exclude.h"

#define PATTERNS_MAX 64

static bool plain(const char *s)
{
        for (; *s; s++)
                if (strchr("*?[\\!#/ ", *s))
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const uint8_t *nul = memchr(data, '\0', size);
        size_t plen = nul ? (size_t)(nul - data) : size;
        char *text = fuzz_strndup(data, plen);
        char *path = fuzz_strndup(nul ? nul + 1 : data + size, nul ? size - plen - 1 : 0);
        const char *pats[PATTERNS_MAX];
        size_t n = 0;
        for (char *save = NULL, *t = strtok_r(text, "\n", &save); t && n < PATTERNS_MAX;
             t = strtok_r(NULL, "\n", &save))
                pats[n++] = t;
        struct exclude_set *x = NULL;
        FUZZ_ASSERT(exclude_set_new(pats, n, &x) == 0);
        for (int dir = 0; dir < 2; dir++) {
                int m = exclude_set_match(x, path, dir);
                FUZZ_ASSERT(m == 0 || m == 1 || m == -E2BIG);
        }
        exclude_set_free(x);
        FUZZ_ASSERT(exclude_glob_match("**", path) == 1);
        for (size_t i = 0; i < n; i++) {
                int m = exclude_glob_match(pats[i], path);
                FUZZ_ASSERT(m == 0 || m == 1 || m == -E2BIG);
                if (*pats[i] && plain(pats[i]))
                        FUZZ_ASSERT(exclude_glob_match(pats[i], pats[i]) == 1);
                char neg[4096];
                if (*pats[i] && pats[i][0] != '!' && pats[i][0] != '#' &&
                    snprintf(neg, sizeof(neg), "!%s", pats[i]) < (int)sizeof(neg)) {
                        const char *pair[] = {pats[i], neg};
                        FUZZ_ASSERT(exclude_set_new(pair, 2, &x) == 0);
                        FUZZ_ASSERT(exclude_set_match(x, path, true) <= 0);
                        exclude_set_free(x);
                }
        }
        free(text);
        free(path);
        return 0;
}
