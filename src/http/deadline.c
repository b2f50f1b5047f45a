/* Deadlines for what a client sends (see deadline.h). */
#include "http/deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "base/log.h"
#include "http/metrics.h"

/* How often the thread looks: a deadline is kept to within this. */
#define SWEEP_MS 200

struct deadline_watch {
        struct deadline_watch *prev, *next;
        int fd;
        enum deadline_phase phase;
        int64_t deadline; /* monotonic ms, 0: none */
        bool expired;     /* shut down already */
};

struct deadlines {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool stopping;
        struct deadline_watch *head;
};

static const char *phase_name(enum deadline_phase p)
{
        return p == DEADLINE_HEADERS ? "headers" : p == DEADLINE_BODY ? "body" : "none";
}

/* Under d->lock: every watch is of a connection whose socket is open. */
static void sweep(struct deadlines *d, int64_t now)
{
        for (struct deadline_watch *w = d->head; w; w = w->next) {
                if (w->expired || !w->deadline || now < w->deadline)
                        continue;
                w->expired = true;
                metrics_deadline_missed(w->phase == DEADLINE_BODY);
                log_warn(NULL, "http.deadline", "phase=%s fd=%d", phase_name(w->phase), w->fd);
                shutdown(w->fd, SHUT_RDWR);
        }
}

static void *watch_thread(void *arg)
{
        struct deadlines *d = arg;
        pthread_mutex_lock(&d->lock);
        while (!d->stopping) {
                sweep(d, monotonic_ms());
                struct timespec until;
                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_nsec += SWEEP_MS * 1000000L;
                if (until.tv_nsec >= 1000000000L) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&d->wake, &d->lock, &until);
        }
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

struct deadlines *deadlines_start(void)
{
        struct deadlines *d = calloc(1, sizeof(*d));
        if (!d)
                return NULL;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->wake, &ca);
        pthread_condattr_destroy(&ca);
        int r = pthread_create(&d->thread, NULL, watch_thread, d);
        if (r != 0) {
                pthread_cond_destroy(&d->wake);
                pthread_mutex_destroy(&d->lock);
                free(d);
                errno = r;
                return NULL;
        }
        return d;
}

/* After libmicrohttpd has stopped: no connection is left to watch. */
void deadlines_stop(struct deadlines *d)
{
        if (!d)
                return;
        pthread_mutex_lock(&d->lock);
        d->stopping = true;
        pthread_cond_signal(&d->wake);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
        while (d->head)
                deadline_watch_remove(d, d->head);
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->lock);
        free(d);
}

struct deadline_watch *deadline_watch_add(struct deadlines *d, int fd)
{
        struct deadline_watch *w = calloc(1, sizeof(*w));
        if (!w)
                return NULL;
        w->fd = fd;
        pthread_mutex_lock(&d->lock);
        w->next = d->head;
        if (d->head)
                d->head->prev = w;
        d->head = w;
        pthread_mutex_unlock(&d->lock);
        return w;
}

void deadline_watch_remove(struct deadlines *d, struct deadline_watch *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&d->lock);
        if (w->prev)
                w->prev->next = w->next;
        else
                d->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        pthread_mutex_unlock(&d->lock);
        free(w);
}

void deadline_watch_arm(struct deadlines *d, struct deadline_watch *w, enum deadline_phase phase,
                        int64_t ms)
{
        if (!w)
                return;
        pthread_mutex_lock(&d->lock);
        w->phase = phase;
        w->deadline = phase == DEADLINE_NONE || ms <= 0 ? 0 : monotonic_ms() + ms;
        pthread_mutex_unlock(&d->lock);
}
