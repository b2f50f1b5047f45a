/* Becoming the run's identity: empty capability bounding set, no
 * supplementary groups, the pooled UID/GID for real, effective and saved
 * ids, locked securebits, no_new_privs, and a parent-death signal (set
 * after the UID change, which clears it). */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/file.h"
#include "jail/jail.h"

static bool bounding_dropped;

int jail_bounding_drop(void)
{
        if (bounding_dropped)
                return 0;
        for (unsigned long cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        bounding_dropped = true;
        return 0;
}

static int verify_no_caps(void)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {0};
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -errno;
        for (int i = 0; i < 2; i++)
                if (data[i].effective || data[i].permitted || data[i].inheritable)
                        return -EPERM;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_ADMIN, 0, 0) > 0)
                return -EPERM;
        return 0;
}

int jail_identity_drop(uid_t uid, gid_t gid)
{
        int r = jail_bounding_drop();
        if (r < 0)
                return r;
        if (prctl(PR_SET_SECUREBITS,
                  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                      SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                      SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return -errno;
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return -errno;
        /* Leaving UID 0 with the setuid fixup on (locked) cleared every
         * capability; check rather than trust. */
        if ((r = verify_no_caps()) < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

/* The capability sets hold cap alone (permitted and effective; nothing
 * inheritable), checked. */
static int caps_only(unsigned cap)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {0};
        data[cap / 32].permitted = data[cap / 32].effective = 1u << (cap % 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        struct __user_cap_data_struct got[2] = {0};
        if (syscall(SYS_capget, &hdr, got) < 0)
                return -errno;
        for (int i = 0; i < 2; i++)
                if (got[i].effective != data[i].effective ||
                    got[i].permitted != data[i].permitted || got[i].inheritable)
                        return -EPERM;
        return 0;
}

int jail_userns_read_all(uid_t uid, gid_t gid)
{
        char map[64];
        /* this process's own /proc files are root's while it is not
         * dumpable (as since it left UID 0): for the maps' writes only */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                return -errno;
        if (unshare(CLONE_NEWUSER) < 0) {
                int e = errno;
                if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                        return -errno;
                /* none to be had here: the caller goes on without */
                return e == EPERM || e == ENOSPC || e == EUSERS || e == EINVAL ? 1 : -e;
        }
        int r = file_write("/proc/self/setgroups", "deny", 0, 0);
        if (r == 0) {
                snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid, (unsigned)uid);
                r = file_write("/proc/self/uid_map", map, 0, 0);
        }
        if (r == 0) {
                snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid, (unsigned)gid);
                r = file_write("/proc/self/gid_map", map, 0, 0);
        }
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 && r == 0)
                r = -errno;
        if (r < 0)
                return r;
        /* every capability in the new namespace came with it: all but
         * one go, the bounding set's first (that needs CAP_SETPCAP) */
        for (unsigned long cap = 0; cap <= 63; cap++)
                if (cap != CAP_DAC_READ_SEARCH && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
                    errno != EINVAL)
                        return -errno;
        return caps_only(CAP_DAC_READ_SEARCH);
}
