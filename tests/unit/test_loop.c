/* Unit tests for base/loop.c: a handler that removes another watch of the
 * same batch of events (and frees it, or watches a new fd that took its
 * number) must not see that watch called with what it left behind. */
#include <stdlib.h>
#include <unistd.h>

#include "base/loop.h"
#include "test.h"

struct pair {
        struct loop *loop;
        int fds[2];
        struct watch w;
        struct pair *other;
        int calls;
        /* a watch set up on the fd number the other pair's fd had */
        struct pair *replacement;
};

static void pair_open(struct pair *p, struct loop *l)
{
        *p = (struct pair){.loop = l};
        EXPECT_INT_EQ(pipe(p->fds), 0);
        EXPECT_INT_EQ(write(p->fds[1], "x", 1), 1); /* readable from now on */
}

static void pair_close(struct pair *p)
{
        loop_unwatch(p->loop, p->fds[0]);
        close(p->fds[0]);
        close(p->fds[1]);
        p->fds[0] = p->fds[1] = -1;
}

/* Whichever of the two is called first removes the other. */
static void on_ready(void *data, uint32_t events)
{
        struct pair *p = data;
        p->calls++;
        if (p->other && p->other->fds[0] >= 0) {
                int old = p->other->fds[0];
                pair_close(p->other);
                if (p->replacement) {
                        int fds[2];
                        EXPECT_INT_EQ(pipe(fds), 0);
                        /* the lowest free number: the one just closed */
                        EXPECT_INT_EQ(fds[0], old);
                        p->replacement->fds[0] = fds[0];
                        p->replacement->fds[1] = fds[1];
                        EXPECT_INT_EQ(write(fds[1], "y", 1), 1);
                        EXPECT_INT_EQ(loop_watch(p->loop, fds[0], &p->replacement->w), 0);
                }
        }
}

static void watch_pair(struct pair *p)
{
        p->w = (struct watch){.fn = on_ready, .data = p};
        EXPECT_INT_EQ(loop_watch(p->loop, p->fds[0], &p->w), 0);
}

TEST(loop_drops_events_of_a_watch_removed_in_the_same_batch)
{
        struct loop *l;
        EXPECT_INT_EQ(loop_new(&l), 0);
        struct pair *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
        pair_open(a, l);
        pair_open(b, l);
        a->other = b;
        b->other = a;
        watch_pair(a);
        watch_pair(b);
        EXPECT_INT_EQ(loop_run_once(l, 1000), 2); /* both were ready */
        EXPECT_INT_EQ(a->calls + b->calls, 1);
        pair_close(a);
        pair_close(b);
        free(a);
        free(b);
        loop_free(l);
}

TEST(loop_drops_a_stale_event_of_a_reused_fd_number)
{
        struct loop *l;
        EXPECT_INT_EQ(loop_new(&l), 0);
        struct pair a, b, ra, rb;
        pair_open(&a, l);
        pair_open(&b, l);
        ra = (struct pair){.loop = l, .fds = {-1, -1}};
        rb = (struct pair){.loop = l, .fds = {-1, -1}};
        ra.w = (struct watch){.fn = on_ready, .data = &ra};
        rb.w = (struct watch){.fn = on_ready, .data = &rb};
        a.other = &b;
        a.replacement = &rb;
        b.other = &a;
        b.replacement = &ra;
        watch_pair(&a);
        watch_pair(&b);
        EXPECT_INT_EQ(loop_run_once(l, 1000), 2);
        /* one of a and b ran; the new watch on the other's number waits
         * for the next batch, the old event is not given to it */
        EXPECT_INT_EQ(a.calls + b.calls, 1);
        EXPECT_INT_EQ(ra.calls + rb.calls, 0);
        /* the next: the survivor again, and the new watch */
        EXPECT_INT_EQ(loop_run_once(l, 1000), 2);
        EXPECT_INT_EQ(a.calls + b.calls, 2);
        EXPECT_INT_EQ(ra.calls + rb.calls, 1);
        struct pair *r = ra.fds[0] >= 0 ? &ra : &rb;
        pair_close(r);
        pair_close(a.fds[0] >= 0 ? &a : &b);
        loop_free(l);
}

TEST(loop_watch_refuses_a_negative_fd)
{
        struct loop *l;
        struct watch w = {0};
        EXPECT_INT_EQ(loop_new(&l), 0);
        EXPECT_TRUE(loop_watch(l, -1, &w) < 0);
        loop_free(l);
}
