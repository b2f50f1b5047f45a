/* Shared by the libFuzzer targets in tests/fuzz/: the entry point's
 * prototype, exact-size copies of the input (so ASan sees any read past
 * the end), and FUZZ_ASSERT for properties the code under test promises. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise is a crash, so libFuzzer saves the input. */
#define FUZZ_ASSERT(c)                                                                             \
        do {                                                                                       \
                if (!(c)) {                                                                        \
                        fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed\n", __FILE__, __LINE__,     \
                                #c);                                                               \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

/* len bytes in a heap block of exactly len bytes (1 for len 0), no NUL. */
static inline char *fuzz_copy(const uint8_t *data, size_t len)
{
        char *p = malloc(len ? len : 1);
        FUZZ_ASSERT(p);
        if (len)
                memcpy(p, data, len);
        return p;
}

/* len bytes plus a NUL: a C string that may hide NULs inside. */
static inline char *fuzz_strndup(const uint8_t *data, size_t len)
{
        char *p = malloc(len + 1);
        FUZZ_ASSERT(p);
        if (len)
                memcpy(p, data, len);
        p[len] = '\0';
        return p;
}
