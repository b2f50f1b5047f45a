/* The zygote's own modules, linked against the embedded interpreter
 * (build/zygote_unit_tests, run by `make unit`): zygote/arenas.c, CPython's
 * object arenas carved out of one 2 MiB-aligned region (alignment, reuse
 * of a freed arena, the unused tail given back, exhaustion falling back
 * to plain maps, a whole interpreter on it), and zygote/thp.c's reading
 * of the host's transparent-huge-page mode. Each case is a process of its
 * own, so each installs the allocator afresh. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <sys/mman.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "test.h"
#include "zygote/arenas.h"
#include "zygote/thp.h"

#define EXPECT_PTR_EQ(a, b) EXPECT_UINT_EQ((uintptr_t)(a), (uintptr_t)(b))
#define MIB (1UL << 20)
#define ARENA MIB /* CPython 3.10+'s arena size; the allocator takes any */
#define REGION (64 * MIB)

static PyObjectArenaAllocator installed(void)
{
        PyObjectArenaAllocator a = {0};
        arenas_install();
        PyObject_GetArenaAllocator(&a);
        return a;
}

/* Whether [p, p + len) is mapped: msync fails with ENOMEM where not. */
static bool mapped(const void *p, size_t len)
{
        return msync((void *)((uintptr_t)p & ~(uintptr_t)4095), len, MS_ASYNC) == 0;
}

TEST(arenas_come_in_a_row_from_a_2mib_aligned_region)
{
        PyObjectArenaAllocator a = installed();
        EXPECT_TRUE(a.alloc != NULL);
        char *first = a.alloc(a.ctx, ARENA);
        EXPECT_TRUE(first != NULL);
        EXPECT_UINT_EQ((uintptr_t)first % (2 * MIB), 0);
        for (size_t i = 1; i < 8; i++) {
                char *p = a.alloc(a.ctx, ARENA);
                EXPECT_PTR_EQ(p, first + i * ARENA);
        }
        memset(first, 0xa5, 8 * ARENA); /* writable, all of it */
        EXPECT_TRUE(mapped(first, REGION));
}

TEST(arenas_freed_in_the_region_are_emptied_and_given_out_again)
{
        PyObjectArenaAllocator a = installed();
        char *p = a.alloc(a.ctx, ARENA), *q = a.alloc(a.ctx, ARENA);
        memset(p, 0x5a, ARENA);
        memset(q, 0x5a, ARENA);
        a.free(a.ctx, p, ARENA);
        EXPECT_TRUE(mapped(p, ARENA)); /* kept, not unmapped */
        char *again = a.alloc(a.ctx, ARENA);
        EXPECT_PTR_EQ(again, p);
        /* as a fresh map would be: the old contents are gone */
        EXPECT_INT_EQ(again[0], 0);
        EXPECT_INT_EQ(again[ARENA - 1], 0);
        EXPECT_INT_EQ(q[0], 0x5a);
        /* a different size is not served from a free slot of another */
        a.free(a.ctx, q, ARENA);
        char *half = a.alloc(a.ctx, ARENA / 2);
        EXPECT_PTR_EQ(half, q + ARENA);
}

TEST(arenas_past_the_region_come_from_plain_maps_and_go_back_to_the_kernel)
{
        PyObjectArenaAllocator a = installed();
        char *first = a.alloc(a.ctx, ARENA);
        for (size_t i = 1; i < REGION / ARENA; i++)
                EXPECT_PTR_EQ(a.alloc(a.ctx, ARENA), first + i * ARENA);
        char *out = a.alloc(a.ctx, ARENA);
        EXPECT_TRUE(out != NULL);
        EXPECT_TRUE(out + ARENA <= first || out >= first + REGION);
        memset(out, 1, ARENA);
        a.free(a.ctx, out, ARENA);
        EXPECT_FALSE(mapped(out, ARENA)); /* unmapped, as CPython's own */
}

TEST(arenas_seal_gives_back_the_tail_but_the_last_huge_page)
{
        PyObjectArenaAllocator a = installed();
        char *first = a.alloc(a.ctx, ARENA);
        a.alloc(a.ctx, ARENA);
        a.alloc(a.ctx, ARENA);
        arenas_seal();
        /* 3 MiB in use: the region ends at the next 2 MiB boundary */
        EXPECT_TRUE(mapped(first, 4 * MIB));
        EXPECT_FALSE(mapped(first + 4 * MIB, MIB));
        EXPECT_FALSE(mapped(first + REGION - MIB, MIB));
        EXPECT_PTR_EQ(a.alloc(a.ctx, ARENA), first + 3 * ARENA);
        char *out = a.alloc(a.ctx, ARENA);
        EXPECT_TRUE(out != NULL && (out + ARENA <= first || out >= first + 4 * MIB));
        out[0] = 1;
}

TEST(arenas_hold_a_running_interpreter)
{
#ifdef __SANITIZE_ADDRESS__
        /* CPython keeps ~13 KiB past Py_FinalizeEx (its own, not ours:
         * this case allocates nothing itself) */
        __lsan_disable();
#endif
        PyObjectArenaAllocator a = installed();
        /* the region's first arena, handed back: the interpreter's first */
        char *first = a.alloc(a.ctx, ARENA);
        a.free(a.ctx, first, ARENA);
        Py_InitializeEx(0);
        PyObject *g = PyDict_New();
        PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins());
        PyObject *r = PyRun_String("x = [str(i) * 3 for i in range(200000)]\n"
                                   "n = sum(len(s) for s in x)\n",
                                   Py_file_input, g, g);
        EXPECT_TRUE(r != NULL);
        Py_DECREF(r);
        PyObject *x = PyDict_GetItemString(g, "x"), *n = PyDict_GetItemString(g, "n");
        EXPECT_INT_EQ(PyLong_AsLong(n), 3 * 1088890);
        /* small objects live in pymalloc's arenas: in the region */
        PyObject *s = PyList_GetItem(x, 123456);
        EXPECT_TRUE((char *)s >= first && (char *)s < first + REGION);
        Py_DECREF(g);
        EXPECT_INT_EQ(Py_FinalizeEx(), 0);
}

TEST(thp_mode_is_the_word_in_brackets)
{
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("always [madvise] never\n", NULL)), "madvise");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("[always] madvise never\n", NULL)), "always");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("always madvise [never]\n", NULL)), "never");
        /* the 2 MiB size's own setting wins unless it inherits */
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("always [madvise] never\n",
                                                   "always [inherit] madvise never\n")),
                      "madvise");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("always madvise [never]\n",
                                                   "[always] inherit madvise never\n")),
                      "always");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("[always] madvise never\n",
                                                   "always inherit madvise [never]\n")),
                      "never");
        /* what it cannot read changes nothing */
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("", NULL)), "never");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("always madvise never", "")), "never");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("[sometimes]", NULL)), "never");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("[always", NULL)), "never");
        EXPECT_STR_EQ(thp_mode_name(thp_mode_parse("[alwaysx] madvise", NULL)), "never");
}
