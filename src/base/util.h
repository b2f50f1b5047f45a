/* Small idioms shared by every module: cleanup attributes with explicit
 * hand-over (TAKE_PTR/TAKE_FD), array sizes, and errno-preserving close.
 * Modelled on systemd's macros; see docs/ARCHITECTURE.md "Conventions". */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static inline void freep(void *p)
{
        free(*(void **)p);
}

static inline int safe_close(int fd)
{
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -1;
}

static inline void closep(int *fd)
{
        safe_close(*fd);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))

/* Hand ownership out of a cleanup variable. */
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _tp = (p);                                                           \
                (p) = NULL;                                                                        \
                _tp;                                                                               \
        })
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _tf = (fd);                                                                    \
                (fd) = -1;                                                                         \
                _tf;                                                                               \
        })

/* Retry a syscall expression on EINTR. */
#define RETRY_EINTR(expr)                                                                          \
        ({                                                                                         \
                long _r;                                                                           \
                do                                                                                 \
                        _r = (long)(expr);                                                         \
                while (_r < 0 && errno == EINTR);                                                  \
                _r;                                                                                \
        })
