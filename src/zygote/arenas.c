/* CPython's small-object arenas in one 2 MiB-aligned region, so the
 * zygote's object heap can be backed by transparent huge pages (see
 * huge_pages() in main.c). Left to itself CPython mmaps each 1 MiB arena
 * apart, which leaves most of them outside any aligned 2 MiB range: every
 * fork then copied, and every run's exit tore down, a page-table entry per
 * 4 KiB of them (~0.4 ms of CPU per run on the 2-core test machine).
 *
 * The region is sized for the zygote's own imports; once they are done,
 * arenas_seal() unmaps the unused tail. Arenas a child asks for later come
 * from plain mmap, as without this allocator; an arena freed inside the
 * region is emptied (MADV_DONTNEED) and kept for reuse. */
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "zygote/arenas.h"

#define REGION_SIZE (64UL << 20)
#define HUGE_SIZE (2UL << 20)
#define MAX_FREE 256

static char *base, *next, *end;
struct slot {
        void *ptr;
        size_t size;
};
static struct slot free_slots[MAX_FREE];
static size_t n_free;

static bool in_region(const void *p)
{
        return base && (const char *)p >= base && (const char *)p < end;
}

static void *arena_alloc(void *ctx, size_t size)
{
        for (size_t i = 0; i < n_free; i++)
                if (free_slots[i].size == size) {
                        void *p = free_slots[i].ptr;
                        free_slots[i] = free_slots[--n_free];
                        return p;
                }
        if (size <= (size_t)(end - next)) {
                void *p = next;
                next += size;
                return p;
        }
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

static void arena_free(void *ctx, void *p, size_t size)
{
        if (!in_region(p)) {
                munmap(p, size);
                return;
        }
        madvise(p, size, MADV_DONTNEED);
        if (n_free < MAX_FREE)
                free_slots[n_free++] = (struct slot){p, size};
        /* else the range stays empty and unused: at most a few MiB of
         * address space, never memory */
}

void arenas_install(void)
{
        /* Over-allocate by one huge page to align the start. */
        char *m = mmap(NULL, REGION_SIZE + HUGE_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
                return; /* CPython's own arenas, as before */
        char *aligned = (char *)(((uintptr_t)m + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1));
        if (aligned > m)
                munmap(m, (size_t)(aligned - m));
        munmap(aligned + REGION_SIZE, (size_t)(m + HUGE_SIZE - aligned));
        base = next = aligned;
        end = aligned + REGION_SIZE;
        PyObjectArenaAllocator a = {.ctx = NULL, .alloc = arena_alloc, .free = arena_free};
        PyObject_SetArenaAllocator(&a);
}

void arenas_seal(void)
{
        if (!base)
                return;
        char *cut = (char *)(((uintptr_t)next + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1));
        if (cut < end)
                munmap(cut, (size_t)(end - cut));
        end = cut;
        /* The gap between next and cut stays for the children's arenas. */
}
