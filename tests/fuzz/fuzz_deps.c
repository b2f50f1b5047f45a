/* libFuzzer target for the dependency layer's text helpers
 * (src/deps/deps_text.c). The input is used twice: as a requirements file
 * (is there anything to install?) and as a package's METADATA file, which
 * pip's process wrote and lockbox does not trust (the name and version the
 * dependency routes list). */
#include <errno.h>
#include <stdbool.h>

#include "fuzz.h"
#include "deps/deps.h"

/* A field read from METADATA: one line, NUL-terminated within its buffer. */
static void check_field(const char *v, size_t size)
{
        FUZZ_ASSERT(memchr(v, '\0', size));
        FUZZ_ASSERT(!strpbrk(v, "\r\n"));
}

static void check_metadata(const uint8_t *data, size_t size, size_t field_size)
{
        char *text = fuzz_strndup(data, size);
        char *name = malloc(field_size), *version = malloc(field_size);
        FUZZ_ASSERT(name && version);
        int r = deps_parse_metadata(text, name, field_size, version, field_size);
        check_field(name, field_size);
        check_field(version, field_size);
        FUZZ_ASSERT(r == 0 ? name[0] && version[0] : r == -EINVAL && (!name[0] || !version[0]));
        free(version);
        free(name);
        free(text);
}

static void check_requirements(const uint8_t *data, size_t size)
{
        char *text = fuzz_copy(data, size);
        bool empty = deps_requirements_empty(text, size);
        /* A line of its own that names something is never "empty"... */
        char *more = malloc(size + 3);
        FUZZ_ASSERT(more);
        if (size)
                memcpy(more, text, size);
        memcpy(more + size, "\nx\n", 3);
        FUZZ_ASSERT(!deps_requirements_empty(more, size + 3));
        /* ...and a trailing comment line changes nothing. */
        memcpy(more + size, "\n#\n", 3);
        FUZZ_ASSERT(deps_requirements_empty(more, size + 3) == empty);
        /* The hash the layer is keyed by chains: hash(a.b) = hash(b, hash(a)). */
        size_t half = size / 2;
        uint64_t whole = deps_hash(text, size, 14695981039346656037ULL);
        FUZZ_ASSERT(whole == deps_hash(text + half, size - half,
                                       deps_hash(text, half, 14695981039346656037ULL)));
        free(more);
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check_requirements(data, size);
        check_metadata(data, size, 256);
        check_metadata(data, size, 4); /* truncation */
        return 0;
}
