/* Gitignore-style exclude patterns (see exclude.h): each pattern is
 * parsed once into a glob over the whole relative path (a pattern that is
 * not anchored gets a leading "**" segment), its negation and whether it
 * matches directories only; a path is then checked against every
 * pattern, the last match deciding. */
#include "shell/exclude.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct exclude_rule {
        char *glob;
        bool negate;
        bool dir_only;
};

struct exclude_set {
        struct exclude_rule *rules;
        size_t n;
};

/* A class at p (just past '['): does c match it? *ret_end: just past its
 * ']'. Without a closing ']' the '[' is a literal (returns -1). */
static int class_match(const char *p, char c, const char **ret_end)
{
        bool negate = *p == '!' || *p == '^';
        if (negate)
                p++;
        bool hit = false;
        const char *start = p;
        while (*p && (*p != ']' || p == start)) {
                char lo = *p;
                if (lo == '\\' && p[1])
                        lo = *++p;
                char hi = lo;
                if (p[1] == '-' && p[2] && p[2] != ']') {
                        p += 2;
                        hi = *p;
                        if (hi == '\\' && p[1])
                                hi = *++p;
                }
                if (c >= lo && c <= hi)
                        hit = true;
                p++;
        }
        if (*p != ']')
                return -1;
        *ret_end = p + 1;
        return hit != negate;
}

/* The steps one pattern may take on one path: backtracking over "*" and
 * "**" is exponential in the worst case ("*a*a*a*a*b"); far more than any
 * sane pattern needs. */
#define GLOB_STEPS_MAX 1000000

static int glob_match(const char *p, const char *s, unsigned long *steps)
{
        for (;;) {
                if (++*steps > GLOB_STEPS_MAX)
                        return -E2BIG;
                if (p[0] == '*' && p[1] == '*' && (p[2] == '/' || p[2] == '\0')) {
                        if (p[2] == '\0') /* a trailing "**": the rest, whatever it is */
                                return true;
                        /* "**" followed by '/': zero or more whole directories */
                        for (const char *t = s;; t++) {
                                int m = t == s || t[-1] == '/' ? glob_match(p + 3, t, steps) : 0;
                                if (m)
                                        return m;
                                if (!*t)
                                        return false;
                        }
                }
                switch (*p) {
                case '\0':
                        return *s == '\0';
                case '*':
                        while (*p == '*')
                                p++;
                        for (const char *t = s;; t++) {
                                int m = glob_match(p, t, steps);
                                if (m)
                                        return m;
                                if (!*t || *t == '/')
                                        return false;
                        }
                case '?':
                        if (!*s || *s == '/')
                                return false;
                        p++, s++;
                        continue;
                case '[': {
                        const char *end = NULL;
                        int m = *s && *s != '/' ? class_match(p + 1, *s, &end) : 0;
                        if (m < 0) { /* no closing ']': a literal '[' */
                                if (*s != '[')
                                        return false;
                                p++, s++;
                                continue;
                        }
                        if (!m)
                                return false;
                        p = end, s++;
                        continue;
                }
                default:
                        if (*p == '\\' && p[1])
                                p++;
                        if (*p != *s)
                                return false;
                        p++, s++;
                }
        }
}

/* Trailing spaces go unless the last one is escaped. */
static size_t trimmed_len(const char *s)
{
        size_t n = strlen(s);
        while (n && s[n - 1] == ' ' && !(n >= 2 && s[n - 2] == '\\'))
                n--;
        return n;
}

/* One pattern into *r: 1, 0 when it matches nothing (blank, comment), or
 * -ENOMEM. */
static int rule_parse(const char *pat, struct exclude_rule *r)
{
        *r = (struct exclude_rule){0};
        size_t n = trimmed_len(pat);
        if (n == 0 || pat[0] == '#')
                return 0;
        if (pat[0] == '!') {
                r->negate = true;
                pat++, n--;
        }
        if (n && pat[n - 1] == '/') {
                r->dir_only = true;
                while (n && pat[n - 1] == '/')
                        n--;
        }
        bool anchored = memchr(pat, '/', n) != NULL;
        while (n && pat[0] == '/')
                pat++, n--;
        if (n == 0)
                return 0;
        const char *prefix = anchored ? "" : "**/";
        size_t plen = strlen(prefix);
        r->glob = malloc(plen + n + 1);
        if (!r->glob)
                return -ENOMEM;
        memcpy(r->glob, prefix, plen);
        memcpy(r->glob + plen, pat, n);
        r->glob[plen + n] = '\0';
        return 1;
}

int exclude_set_new(const char *const *patterns, size_t n, struct exclude_set **ret)
{
        struct exclude_set *x = calloc(1, sizeof(*x));
        if (!x || (n && !(x->rules = calloc(n, sizeof(*x->rules))))) {
                free(x);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                int r = rule_parse(patterns[i], &x->rules[x->n]);
                if (r < 0) {
                        exclude_set_free(x);
                        return r;
                }
                x->n += (size_t)r;
        }
        *ret = x;
        return 0;
}

struct exclude_set *exclude_set_free(struct exclude_set *x)
{
        if (!x)
                return NULL;
        for (size_t i = 0; i < x->n; i++)
                free(x->rules[i].glob);
        free(x->rules);
        free(x);
        return NULL;
}

int exclude_glob_match(const char *pattern, const char *path)
{
        unsigned long steps = 0;
        return glob_match(pattern, path, &steps);
}

int exclude_set_match(const struct exclude_set *x, const char *path, bool is_dir)
{
        bool excluded = false;
        for (size_t i = 0; x && i < x->n; i++) {
                const struct exclude_rule *r = &x->rules[i];
                int m = !r->dir_only || is_dir ? exclude_glob_match(r->glob, path) : 0;
                if (m < 0)
                        return m;
                if (m)
                        excluded = !r->negate;
        }
        return excluded;
}
