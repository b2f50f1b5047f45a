/* The monotonic clock in the units lockbox counts in. */
#pragma once

#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC (since an arbitrary start). */
static inline int64_t monotonic_ms(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
