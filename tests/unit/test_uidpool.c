/* Unit tests for the sandbox UID pool. */
#include <errno.h>

#include "jail/uidpool.h"
#include "test.h"

TEST(uidpool_acquire_all_then_exhausted)
{
        struct uidpool *p;
        EXPECT_INT_EQ(uidpool_new(10000, 10002, &p), 0);
        uid_t a, b, c, d;
        EXPECT_INT_EQ(uidpool_acquire(p, &a), 0);
        EXPECT_INT_EQ(uidpool_acquire(p, &b), 0);
        EXPECT_INT_EQ(uidpool_acquire(p, &c), 0);
        EXPECT_INT_EQ(a, 10000);
        EXPECT_INT_EQ(b, 10001);
        EXPECT_INT_EQ(c, 10002);
        EXPECT_INT_EQ(uidpool_acquire(p, &d), -EAGAIN);
        EXPECT_INT_EQ(uidpool_in_use(p), 3);
        uidpool_free(p);
}

TEST(uidpool_release_reuses_last)
{
        struct uidpool *p;
        EXPECT_INT_EQ(uidpool_new(500, 503, &p), 0);
        uid_t a, b, x;
        EXPECT_INT_EQ(uidpool_acquire(p, &a), 0);
        EXPECT_INT_EQ(uidpool_acquire(p, &b), 0);
        EXPECT_INT_EQ(uidpool_release(p, a), 0);
        /* 502 and 503 were free before 500 came back. */
        EXPECT_INT_EQ(uidpool_acquire(p, &x), 0);
        EXPECT_INT_EQ(x, 502);
        EXPECT_INT_EQ(uidpool_acquire(p, &x), 0);
        EXPECT_INT_EQ(x, 503);
        EXPECT_INT_EQ(uidpool_acquire(p, &x), 0);
        EXPECT_INT_EQ(x, 500);
        EXPECT_INT_EQ(uidpool_in_use(p), 4);
        uidpool_free(p);
}

TEST(uidpool_rejects_foreign_and_double_release)
{
        struct uidpool *p;
        EXPECT_INT_EQ(uidpool_new(10, 11, &p), 0);
        uid_t a;
        EXPECT_INT_EQ(uidpool_acquire(p, &a), 0);
        EXPECT_INT_EQ(uidpool_release(p, 9), -EINVAL);
        EXPECT_INT_EQ(uidpool_release(p, 12), -EINVAL);
        EXPECT_INT_EQ(uidpool_release(p, 11), -EINVAL); /* never borrowed */
        EXPECT_INT_EQ(uidpool_release(p, a), 0);
        EXPECT_INT_EQ(uidpool_release(p, a), -EINVAL);
        EXPECT_INT_EQ(uidpool_in_use(p), 0);
        uidpool_free(p);
}

TEST(uidpool_bad_range)
{
        struct uidpool *p = NULL;
        EXPECT_INT_EQ(uidpool_new(20, 19, &p), -EINVAL);
        EXPECT_TRUE(p == NULL);
        EXPECT_INT_EQ(uidpool_new(1, 1, &p), 0);
        EXPECT_TRUE(uidpool_contains(p, 1));
        EXPECT_TRUE(!uidpool_contains(p, 2));
        uidpool_free(p);
}

TEST(uidpool_churn_keeps_every_uid_unique)
{
        struct uidpool *p;
        EXPECT_INT_EQ(uidpool_new(1000, 1007, &p), 0);
        uid_t held[8];
        unsigned n = 0;
        for (int round = 0; round < 1000; round++) {
                if (n < 8 && (round % 3 != 0 || n == 0)) {
                        EXPECT_INT_EQ(uidpool_acquire(p, &held[n]), 0);
                        for (unsigned i = 0; i < n; i++)
                                EXPECT_TRUE(held[i] != held[n]);
                        n++;
                } else {
                        unsigned k = (unsigned)round % n;
                        EXPECT_INT_EQ(uidpool_release(p, held[k]), 0);
                        held[k] = held[--n];
                }
                EXPECT_INT_EQ(uidpool_in_use(p), n);
        }
        uidpool_free(p);
}
