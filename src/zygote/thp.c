/* The zygote's anonymous memory on transparent huge pages: each fork
 * copies, and each run's exit tears down, a few page-middle entries for
 * the memory on huge pages instead of a page-table entry per 4 KiB of
 * it. A child's write to a shared huge page splits the child's mapping
 * and copies 4 KiB, as before.
 *
 * The host's administrator chooses with the THP mode: always and madvise
 * get huge pages; with never the zygote changes nothing (no arena region,
 * no MADV_HUGEPAGE, no MADV_COLLAPSE, which the kernel honours whatever
 * the mode says). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>

#include "base/file.h"
#include "zygote/thp.h"

#define HUGE_PAGE 0x200000UL
#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

static const char *const mode_names[] = {
    [THP_NEVER] = "never", [THP_MADVISE] = "madvise", [THP_ALWAYS] = "always"};

const char *thp_mode_name(enum thp_mode mode)
{
        return mode_names[mode];
}

/* The word in brackets ("always [madvise] never"), or "" */
static size_t selected(const char *text, const char **ret_word)
{
        const char *open = text ? strchr(text, '[') : NULL;
        const char *close = open ? strchr(open, ']') : NULL;
        *ret_word = open ? open + 1 : "";
        return close ? (size_t)(close - open - 1) : 0;
}

static bool word_is(const char *word, size_t len, const char *name)
{
        return len == strlen(name) && strncmp(word, name, len) == 0;
}

enum thp_mode thp_mode_parse(const char *global, const char *pmd)
{
        const char *w;
        size_t n = selected(pmd, &w);
        if (!n || word_is(w, n, "inherit"))
                n = selected(global, &w);
        for (size_t m = 0; m < sizeof(mode_names) / sizeof(mode_names[0]); m++)
                if (word_is(w, n, mode_names[m]))
                        return (enum thp_mode)m;
        return THP_NEVER;
}

enum thp_mode thp_mode_read(void)
{
        char global[128], pmd[128], size[32], path[128];
        if (file_read_buf(THP_DIR "/enabled", global, sizeof(global)) <= 0)
                return THP_NEVER;
        unsigned long bytes = 0;
        bool own = file_read_buf(THP_DIR "/hpage_pmd_size", size, sizeof(size)) > 0 &&
                   sscanf(size, "%lu", &bytes) == 1 &&
                   snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/enabled", bytes >> 10) <
                       (int)sizeof(path) &&
                   file_read_buf(path, pmd, sizeof(pmd)) > 0;
        return thp_mode_parse(global, own ? pmd : NULL);
}

/* A collapse fills the rest of the 2 MiB with zeroes: only where half is
 * in use already. */
static bool mostly_resident(unsigned long addr)
{
        unsigned char vec[HUGE_PAGE / 4096];
        if (mincore((void *)addr, HUGE_PAGE, vec) < 0)
                return false;
        size_t n = 0;
        for (size_t i = 0; i < sizeof(vec); i++)
                n += vec[i] & 1;
        return n >= sizeof(vec) / 2;
}

/* The aligned 2 MiB pieces of [lo, hi) collapsed, in bytes. Mappings
 * over 1 GiB are left alone (none of CPython's; ASan's shadow in
 * sanitized builds is terabytes). */
static unsigned long collapse_range(unsigned long a, unsigned long b)
{
        unsigned long lo = (a + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), hi = b & ~(HUGE_PAGE - 1);
        unsigned long total = 0;
        if (hi <= lo || hi - lo > (1UL << 30) || madvise((void *)lo, hi - lo, MADV_HUGEPAGE) < 0)
                return 0;
        /* One huge page at a time, each tried twice: a collapse can fail
         * for a moment (EAGAIN), and a failure must not cost the rest. */
        for (unsigned long h = lo; h < hi; h += HUGE_PAGE)
                for (int try = 0; try < 2 && mostly_resident(h); try++)
                        if (madvise((void *)h, HUGE_PAGE, MADV_COLLAPSE) == 0) {
                                total += HUGE_PAGE;
                                break;
                        }
        return total;
}

unsigned long thp_collapse(void)
{
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return 0;
        FILE *f = fopen("/proc/self/maps", "re");
        char line[512];
        unsigned long total = 0;
        while (f && fgets(line, sizeof(line), f)) {
                unsigned long a, b;
                char perms[8];
                int n = 0;
                /* anonymous (no name) or the malloc heap, private, writable */
                if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &a, &b, perms, &n) >= 3 &&
                    strncmp(perms, "rw-p", 4) == 0 &&
                    (line[n] == '\0' || strncmp(line + n, "[heap]", 6) == 0))
                        total += collapse_range(a, b);
        }
        if (f)
                fclose(f);
        umount2("/proc", MNT_DETACH);
        return total;
}
