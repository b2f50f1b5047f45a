/* UID pool (see uidpool.h). Free UIDs sit in a FIFO ring so a released UID
 * is reused last: a straggler from an old run (which cannot exist, since
 * release follows reaping, but defence in depth) meets a fresh UID. */
#include "jail/uidpool.h"

#include <errno.h>
#include <stdlib.h>

struct uidpool {
        uid_t first;
        unsigned size;
        unsigned head; /* next free to hand out */
        unsigned n_free;
        uid_t *ring; /* free UIDs, ring buffer of size entries */
        bool *borrowed;
};

int uidpool_new(uid_t first, uid_t last, struct uidpool **ret)
{
        if (last < first || last - first >= 1u << 20)
                return -EINVAL;
        struct uidpool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->first = first;
        p->size = (unsigned)(last - first) + 1;
        p->ring = calloc(p->size, sizeof(uid_t));
        p->borrowed = calloc(p->size, sizeof(bool));
        if (!p->ring || !p->borrowed) {
                uidpool_free(p);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < p->size; i++)
                p->ring[i] = first + i;
        p->n_free = p->size;
        *ret = p;
        return 0;
}

struct uidpool *uidpool_free(struct uidpool *p)
{
        if (p) {
                free(p->ring);
                free(p->borrowed);
                free(p);
        }
        return NULL;
}

int uidpool_acquire(struct uidpool *p, uid_t *ret_uid)
{
        if (p->n_free == 0)
                return -EAGAIN;
        uid_t uid = p->ring[p->head];
        p->head = (p->head + 1) % p->size;
        p->n_free--;
        p->borrowed[uid - p->first] = true;
        *ret_uid = uid;
        return 0;
}

int uidpool_release(struct uidpool *p, uid_t uid)
{
        if (!uidpool_contains(p, uid) || !p->borrowed[uid - p->first])
                return -EINVAL;
        p->borrowed[uid - p->first] = false;
        p->ring[(p->head + p->n_free) % p->size] = uid;
        p->n_free++;
        return 0;
}

unsigned uidpool_in_use(const struct uidpool *p)
{
        return p->size - p->n_free;
}

bool uidpool_contains(const struct uidpool *p, uid_t uid)
{
        return uid >= p->first && uid - p->first < p->size;
}
