/* The monotonic clock in the units lockbox counts in: every elapsed time
 * and deadline in lockbox is one of these numbers (since an arbitrary start). */
#pragma once

#include <stdint.h>
#include <time.h>

/* Microseconds on CLOCK_MONOTONIC. */
static inline int64_t monotonic_us(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* Milliseconds on CLOCK_MONOTONIC. */
static inline int64_t monotonic_ms(void)
{
        return monotonic_us() / 1000;
}
