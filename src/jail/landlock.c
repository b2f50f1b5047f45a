/* Landlock (see landlock.h). The kernel headers of the build host may
 * predate the newer ABIs, so the rights and structures used here are
 * spelled out (their values are the kernel's UAPI). */
#include "jail/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

/* filesystem rights: ABI 1 has the first 13, then REFER (2), TRUNCATE
 * (3), IOCTL_DEV (5) */
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_ABI1 ((1ULL << 13) - 1)
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
/* the rights that apply to a file; the others only to directories (the
 * kernel refuses them on a file's rule) */
#define LL_FS_ON_FILES                                                                             \
        (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net; /* ABI 4 */
        uint64_t scoped;             /* ABI 6 */
};

struct ll_path_beneath_attr {
        uint64_t allowed_access;
        int32_t parent_fd;
} __attribute__((packed));

struct ll_net_port_attr {
        uint64_t allowed_access;
        uint64_t port;
};

int landlock_abi(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
        if (abi < 0)
                /* (EPERM: a container's seccomp profile that does not know
                 * Landlock's calls) */
                return errno == ENOSYS || errno == EOPNOTSUPP || errno == EPERM ? -EOPNOTSUPP
                                                                                : -errno;
        return (int)abi;
}

static uint64_t fs_rights(int abi)
{
        return LL_FS_ABI1 | (abi >= 2 ? LL_FS_REFER : 0) | (abi >= 3 ? LL_FS_TRUNCATE : 0) |
               (abi >= 5 ? LL_FS_IOCTL_DEV : 0);
}

static int add_rules(int ruleset, int abi, const int *read_dirs, size_t n_dirs,
                     const uint16_t *connect_ports, size_t n_ports)
{
        for (size_t i = 0; i < n_dirs; i++) {
                struct ll_path_beneath_attr pb = {
                    .allowed_access = LL_FS_READ_FILE | LL_FS_READ_DIR, .parent_fd = read_dirs[i]};
                if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
                        return -errno;
        }
        for (size_t i = 0; abi >= 4 && i < n_ports; i++) {
                struct ll_net_port_attr np = {.allowed_access = LL_NET_CONNECT_TCP,
                                              .port = connect_ports[i]};
                if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &np, 0) < 0)
                        return -errno;
        }
        return 0;
}

int landlock_confine(const int *read_dirs, size_t n_dirs, const uint16_t *connect_ports,
                     size_t n_ports)
{
        int abi = landlock_abi();
        if (abi < 0)
                return abi;
        struct ll_ruleset_attr attr = {
            .handled_access_fs = fs_rights(abi),
            .handled_access_net = abi >= 4 ? LL_NET_BIND_TCP | LL_NET_CONNECT_TCP : 0,
            .scoped = abi >= 6 ? LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL : 0,
        };
        size_t size = abi >= 6 ? sizeof(attr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
        _cleanup_close_ int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
        if (ruleset < 0)
                return -errno;
        int r = add_rules(ruleset, abi, read_dirs, n_dirs, connect_ports, n_ports);
        if (r < 0)
                return r;
        return syscall(SYS_landlock_restrict_self, ruleset, 0) < 0 ? -errno : 0;
}

int landlock_scope_self(void)
{
        if (landlock_abi() < 6)
                return 0;
        struct ll_ruleset_attr attr = {.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL};
        _cleanup_close_ int ruleset =
            (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (ruleset < 0)
                return -errno;
        return syscall(SYS_landlock_restrict_self, ruleset, 0) < 0 ? -errno : 0;
}

/* One path's rule: `access` as far as the ruleset handles it, trimmed to
 * a file's rights when the path is not a directory. 0 when it does not
 * exist. */
static int add_path(int ruleset, const char *path, uint64_t access, uint64_t handled)
{
        _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        struct ll_path_beneath_attr pb = {.allowed_access = access & handled, .parent_fd = fd};
        if (!S_ISDIR(st.st_mode))
                pb.allowed_access &= LL_FS_ON_FILES;
        if (pb.allowed_access == 0)
                return 0;
        return syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) < 0 ? -errno
                                                                                         : 0;
}

static int add_paths(int ruleset, const char *const *paths, size_t n, uint64_t access,
                     uint64_t handled)
{
        for (size_t i = 0; i < n; i++) {
                int r = add_path(ruleset, paths[i], access, handled);
                if (r < 0)
                        return r;
        }
        return 0;
}

int landlock_paths_ruleset(const char *const *rw, size_t n_rw, const char *const *ro, size_t n_ro,
                           const char *const *rw_dev, size_t n_dev, bool scoped)
{
        int abi = landlock_abi();
        if (abi < 0)
                return abi;
        /* Every filesystem right this kernel knows is handled, so none is
         * left open by omission; the network is the namespace's and the
         * seccomp filter's business (not handled here). */
        struct ll_ruleset_attr attr = {
            .handled_access_fs = fs_rights(abi),
            .scoped = abi >= 6 && scoped ? LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL : 0,
        };
        size_t size = abi >= 6 && scoped ? sizeof(attr) : sizeof(uint64_t);
        _cleanup_close_ int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
        if (ruleset < 0)
                return -errno;
        uint64_t all = attr.handled_access_fs;
        /* Read-write directories: everything, executing what is built
         * there included (a.out, a venv's scripts, node_modules/.bin). */
        int r = add_paths(ruleset, rw, n_rw, all, all);
        /* Read-only: read, list and execute. */
        if (r >= 0)
                r = add_paths(ruleset, ro, n_ro, LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR,
                              all);
        /* Devices: read and write, O_TRUNC (`> /dev/null`, ABI 3) and
         * terminal requests on /dev/tty (ABI 5; the seccomp filter decides
         * which). A directory listed here (/dev/pts) is listed too. */
        if (r >= 0)
                r = add_paths(ruleset, rw_dev, n_dev,
                              LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE |
                                  LL_FS_IOCTL_DEV | LL_FS_READ_DIR,
                              all);
        if (r < 0)
                return r;
        return TAKE_FD(ruleset);
}

int landlock_restrict_paths(const char *const *rw, size_t n_rw, const char *const *ro, size_t n_ro,
                            const char *const *rw_dev, size_t n_dev, bool scoped)
{
        _cleanup_close_ int ruleset =
            landlock_paths_ruleset(rw, n_rw, ro, n_ro, rw_dev, n_dev, scoped);
        if (ruleset < 0)
                return ruleset;
        return syscall(SYS_landlock_restrict_self, ruleset, 0) < 0 ? -errno : 0;
}
