/* allowed_syscalls: extra system calls an operator lets jailed code make,
 * given by number or name and resolved on the native architecture with
 * libseccomp. Calls that would undo the jail are refused whatever the
 * config says; the jail's policy test checks its table against this list. */
#include <errno.h>
#include <limits.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "config/schema.h"

/* Each of these would let code in the jail run another program behind the
 * seccomp policy's back (execve*), inspect or drive other processes
 * (ptrace, process_vm_*), stack or replace filters (seccomp, bpf), leave or
 * rebuild its namespaces and mounts, or change the running kernel. */
/* clang-format off */
const char *const config_never_allowed_syscalls[] = {
        "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev",
        "seccomp", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
        "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
        "mount_setattr", "bpf", "kexec_load", "kexec_file_load", "init_module",
        "finit_module", "delete_module", NULL,
};
/* clang-format on */

static bool syscall_is_never(const char *name)
{
        for (size_t i = 0; config_never_allowed_syscalls[i]; i++)
                if (strcmp(name, config_never_allowed_syscalls[i]) == 0)
                        return true;
        return false;
}

/* Number of a syscall given as a decimal number or a name, or -1. */
static int syscall_lookup(const char *text)
{
        int64_t nr;
        if (parse_int64(text, &nr) == 0)
                return nr >= 0 && nr <= INT_MAX ? (int)nr : -1;
        int r = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, text);
        /* Negative values are libseccomp pseudo-numbers for calls that do
         * not exist on this architecture (e.g. "open" on aarch64). */
        return r >= 0 ? r : -1;
}

/* Resolves items[i]; fails for unknown names and the never list. */
static int syscall_resolve(const char *text, size_t i, int *ret, struct schema_error *e)
{
        char q[96];
        schema_quote(text, q, sizeof(q));
        int nr = syscall_lookup(text);
        _cleanup_free_ char *name =
            nr >= 0 ? seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr) : NULL;
        if (!name)
                return schema_fail(e, i, "'%s' is not a system call on this architecture", q);
        if (syscall_is_never(name)) {
                bool same = strcmp(name, text) == 0;
                return schema_fail(e, i,
                                   "'%s'%s%s%s can never be allowed: it would let jailed code "
                                   "escape or reshape the jail",
                                   q, same ? "" : " (", same ? "" : name, same ? "" : ")");
        }
        *ret = nr;
        return 0;
}

static bool syscall_listed(const int *v, size_t n, int nr)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] == nr)
                        return true;
        return false;
}

static int syscalls_set(const struct schema_row *row, struct config *cfg,
                        const struct schema_item *items, size_t n, struct schema_error *e)
{
        _cleanup_free_ int *v = calloc(n ? n : 1, sizeof(int));
        size_t len = 0;
        if (!v)
                return schema_fail_nomem(e, 0);
        for (size_t i = 0; i < n; i++) {
                int nr = -1;
                int r = syscall_resolve(items[i].text ? items[i].text : "", i, &nr, e);
                if (r < 0)
                        return r;
                if (!syscall_listed(v, len, nr))
                        v[len++] = nr;
        }
        int **field = schema_field(row, cfg);
        size_t *count = (size_t *)((char *)cfg + row->count_offset);
        free(*field);
        *field = TAKE_PTR(v);
        *count = len;
        return 0;
}

static void syscalls_dump(const struct schema_row *row, const struct config *cfg, FILE *out,
                          int indent)
{
        const int *v = *(int *const *)schema_cfield(row, cfg);
        size_t n = *(const size_t *)((const char *)cfg + row->count_offset);
        if (n == 0 || !v) {
                fputs(" []\n", out);
                return;
        }
        fputc('\n', out);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name =
                    seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, v[i]);
                fprintf(out, "%*s- %d # %s\n", indent + 2, "", v[i], name ? name : "?");
        }
}

static void syscalls_free(const struct schema_row *row, struct config *cfg)
{
        int **field = schema_field(row, cfg);
        free(*field);
        *field = NULL;
        *(size_t *)((char *)cfg + row->count_offset) = 0;
}

const struct schema_type schema_type_syscalls = {
    .doc_name = "list of syscalls",
    .is_list = true,
    .set = syscalls_set,
    .dump = syscalls_dump,
    .describe = schema_describe_nothing,
    .free = syscalls_free,
};
