/* The exclude patterns of a HOME snapshot (POST /v1/snapshot/save), in
 * gitignore's syntax, matched against paths relative to HOME:
 *
 *   - a blank pattern, or one starting with '#', matches nothing ("\#"
 *     is a literal '#'); trailing spaces are dropped unless escaped;
 *   - '!' negates: a path the pattern matches is included again ("\!" is
 *     a literal '!'); the last pattern that matches a path decides;
 *   - a trailing '/' matches directories only;
 *   - a pattern with a '/' before its end is anchored at HOME (a leading
 *     '/' only anchors); one without matches the name at any depth;
 *   - '*' is any run of characters but '/', '?' any one but '/', "[...]"
 *     a class ("[!...]" or "[^...]" negated, "a-z" ranges), '\' escapes;
 *   - "**" as a whole segment: "**" followed by '/' is any number of
 *     directories (none too), and a final "**" segment everything inside.
 *
 * The walk does not enter a directory it excluded, so, as in git, a file
 * inside an excluded directory cannot be included again. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct exclude_set;

/* The set of n patterns (each NUL-terminated); 0 with *ret, or -ENOMEM. */
int exclude_set_new(const char *const *patterns, size_t n, struct exclude_set **ret);
struct exclude_set *exclude_set_free(struct exclude_set *x);
/* Is path (relative, '/'-separated, no leading or trailing '/'), whose
 * parent directory is not excluded, excluded? is_dir: it is a directory.
 * 1 or 0; -E2BIG when a pattern would take more than a million steps on
 * it (backtracking over many '*': the caller fails rather than guess). */
int exclude_set_match(const struct exclude_set *x, const char *path, bool is_dir);
/* One glob (the syntax above, without '!', anchoring or a trailing '/')
 * against a whole path: 1, 0 or -E2BIG. Exposed for the tests. */
int exclude_glob_match(const char *pattern, const char *path);
