/* Launching pip for the dependency layer: `python -m pip install --target`
 * the staging directory, from the copy of the requirements in its .home/,
 * as the installer's account (no groups, no privileges), with lockbox's
 * own proxy and mirror settings and the operator's PIP_* variables. pip
 * runs under a reaper that is PID 1 of a PID namespace of its own, so
 * whatever pip leaves behind dies with it. */
#pragma once

#include <sys/types.h>

struct config;

/* A running install: the reaper's pid, a pidfd of it (readable when it
 * ended), and the read end (non-blocking) of pip's output. */
struct deps_pip {
        pid_t pid;
        int pidfd, out;
};

/* Starts pip for staging (an absolute path whose .home/requirements.txt
 * the installer can read) as uid/gid. 0 or -errno. */
int deps_pip_start(const struct config *c, uid_t uid, gid_t gid, const char *staging,
                   struct deps_pip *ret);
/* Asks the reaper to kill and reap pip (SIGTERM); its exit follows. */
void deps_pip_term(const struct deps_pip *p);
/* deps_pip_term, then SIGKILL if the reaper has not ended within
 * wait_ms, and reap it. */
void deps_pip_stop(struct deps_pip *p, int wait_ms);
