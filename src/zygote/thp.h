/* The zygote's anonymous memory on transparent huge pages: which mode
 * the host's kernel is in, and the collapse after the imports. */
#pragma once

enum thp_mode { THP_NEVER, THP_MADVISE, THP_ALWAYS };

/* The mode the kernel applies to 2 MiB anonymous pages, from the text of
 * /sys/kernel/mm/transparent_hugepage/enabled and of the 2 MiB size's
 * own enabled file (NULL: none, as before Linux 6.8): the word in
 * brackets, the size's own unless it says inherit. Text without a known
 * word in brackets reads as never. */
enum thp_mode thp_mode_parse(const char *global, const char *pmd);
/* The same from /sys (never if the kernel has no THP). */
enum thp_mode thp_mode_read(void);
const char *thp_mode_name(enum thp_mode mode);
/* Mark the process's anonymous writable maps MADV_HUGEPAGE and collapse
 * the 2 MiB pieces of them that are at least half in use; the bytes now
 * on huge pages. Mounts /proc for the moment (the zygote's root has
 * none). Only for modes other than never: MADV_COLLAPSE ignores the
 * mode and would collapse anyway. */
unsigned long thp_collapse(void);
