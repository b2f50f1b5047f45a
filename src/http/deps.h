/* Reading the Python requirements file for the dependency routes: one
 * {"name","version"} object per requirement line, in file order. */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* A missing file is an empty list. Returns 0 or -errno with err set. */
int deps_list_requirements(const char *path, json_t **ret, char *err, size_t errlen);
/* Parse requirement text (pip's requirements format, options and comments
 * skipped) into the same array. */
json_t *deps_parse_requirements(const char *text, size_t len);
