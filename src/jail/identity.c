/* Becoming the run's identity: empty capability bounding set, no
 * supplementary groups, the pooled UID/GID for real, effective and saved
 * ids, locked securebits, no_new_privs, and a parent-death signal (set
 * after the UID change, which clears it). */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

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
