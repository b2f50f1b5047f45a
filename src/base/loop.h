/* An event loop: one epoll set whose every watch is a callback and its
 * data (as libuv's and sd-event's), so the loop knows nothing of what it
 * serves. Single-threaded. The jailer runs on it, and so do the modules
 * below the jailer that it drives (deps). */
#pragma once

#include <stdint.h>

struct loop;

/* What to call when a watched fd is ready: fn(data, epoll events). */
struct watch {
        void (*fn)(void *data, uint32_t events);
        void *data;
};

int loop_new(struct loop **ret);
struct loop *loop_free(struct loop *l);
/* Watch fd for input; w must live until loop_unwatch(fd). 0 or -errno. */
int loop_watch(struct loop *l, int fd, struct watch *w);
/* Stop watching fd (nothing for a negative fd). */
void loop_unwatch(struct loop *l, int fd);
/* Wait up to timeout_ms (-1: no limit) and call the ready watches: how
 * many, or -errno. */
int loop_run_once(struct loop *l, int timeout_ms);
