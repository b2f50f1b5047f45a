/* Launching pip for the dependency layer (pip.h): its command line and
 * environment, the installer's identity, and the reaper that runs it as
 * PID 1 of a namespace of its own. */
#include "deps/pip.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/util.h"
#include "config/config.h"

/* Options pip_argv() adds to the fixed ones: at most --only-binary and
 * the mirror's four. */
#define PIP_ARGV_OPTIONAL 5

static char **pip_argv(const struct config *c, const char *staging)
{
        const char *fixed[] = {c->python_path,
                               "-m",
                               "pip",
                               "install",
                               "--no-input",
                               "--disable-pip-version-check",
                               "--no-cache-dir",
                               "--no-warn-script-location",
                               "--progress-bar",
                               "off",
                               "--target",
                               staging,
                               "-r",
                               ".home/requirements.txt"};
        char **v = calloc(ELEMENTSOF(fixed) + PIP_ARGV_OPTIONAL + 1, sizeof(char *));
        size_t n = 0;
        if (!v)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                v[n++] = (char *)fixed[i];
        if (!c->source_builds)
                v[n++] = (char *)"--only-binary=:all:";
        if (*c->wheel_dir) {
                v[n++] = (char *)"--no-index";
                v[n++] = (char *)"--find-links";
                v[n++] = c->wheel_dir;
        } else if (*c->python_pip_mirror_url) {
                v[n++] = (char *)"--index-url";
                v[n++] = c->python_pip_mirror_url;
                /* an http:// mirror works without more flags */
                if (strncmp(c->python_pip_mirror_url, "http://", 7) == 0) {
                        static char host[256];
                        int len = (int)strcspn(c->python_pip_mirror_url + 7, "/:@");
                        /* a host name is at most 253 bytes: else pip says what is wrong */
                        if ((size_t)snprintf(host, sizeof(host), "%.*s", len,
                                             c->python_pip_mirror_url + 7) < sizeof(host)) {
                                v[n++] = (char *)"--trusted-host";
                                v[n++] = host;
                        }
                }
        }
        return v;
}

/* What of lockboxd's environment reaches pip (never a run): pip's own
 * settings as operators give them (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
 * PIP_TRUSTED_HOST, PIP_CERT, PIP_FIND_LINKS... every PIP_*), proxy
 * exceptions and CA bundles. lockbox's own keys win: the proxies come from
 * proxy.* (HTTP_PROXY, HTTPS_PROXY), and python_pip_mirror_url and
 * dependencies.wheel_dir are command-line options, which pip prefers to
 * its environment. */
static bool passed_to_pip(const char *entry)
{
        static const char *const names[] = {
            "NO_PROXY=",     "no_proxy=",           "SSL_CERT_FILE=",
            "SSL_CERT_DIR=", "REQUESTS_CA_BUNDLE=", "CURL_CA_BUNDLE="};
        if (strncmp(entry, "PIP_", 4) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strncmp(entry, names[i], strlen(names[i])) == 0)
                        return true;
        return false;
}

/* Entries of pip's environment that are lockbox's own: PATH, LANG, HOME,
 * TMPDIR and the two proxies. */
#define PIP_OWN_ENV 6

/* The child: the installer's UID, no privileges, in the staging directory. */
static _Noreturn void pip_child(const struct config *c, uid_t uid, gid_t gid, int out,
                                const char *staging)
{
        /* pip's temporary files go into its HOME, in the staging tree: a
         * killed install leaves nothing in the host's /tmp */
        char home[4096], tmp[4096];
        if ((size_t)snprintf(home, sizeof(home), "HOME=%s/.home", staging) >= sizeof(home) ||
            (size_t)snprintf(tmp, sizeof(tmp), "TMPDIR=%s/.home", staging) >= sizeof(tmp))
                _exit(126);
        size_t n_environ = 0;
        for (char **e = environ; e && *e; e++)
                n_environ++;
        char **envp = calloc(n_environ + PIP_OWN_ENV + 1, sizeof(char *));
        if (!envp)
                _exit(126);
        size_t ne = 0;
        envp[ne++] = (char *)"PATH=/usr/local/bin:/usr/bin:/bin";
        envp[ne++] = (char *)"LANG=C.UTF-8";
        envp[ne++] = home;
        envp[ne++] = tmp;
        char hp[600], sp[600];
        /* a proxy that does not fit is no reason to go around it */
        if (*c->proxy_http) {
                if ((size_t)snprintf(hp, sizeof(hp), "HTTP_PROXY=%s", c->proxy_http) >= sizeof(hp))
                        _exit(126);
                envp[ne++] = hp;
        }
        if (*c->proxy_https) {
                if ((size_t)snprintf(sp, sizeof(sp), "HTTPS_PROXY=%s", c->proxy_https) >=
                    sizeof(sp))
                        _exit(126);
                envp[ne++] = sp;
        }
        for (char **e = environ; e && *e; e++)
                if (passed_to_pip(*e))
                        envp[ne++] = *e;
        char **argv = pip_argv(c, staging);
        sigset_t none;
        sigemptyset(&none);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (!argv || null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
            setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
            setresuid(uid, uid, uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || chdir(staging) < 0)
                _exit(126);
        fd_close_from(3);
        execve(argv[0], argv, envp);
        _exit(127);
}

static volatile pid_t pip_pid;

static void kill_pip(int sig)
{
        (void)sig;
        kill(pip_pid, SIGKILL);
}

/* pip runs as PID 1 of a namespace of its own: when it ends, the kernel
 * kills whatever it left behind (a source build's daemon, say), so nothing
 * running as the installer's UID can touch the layer while it is sealed. This
 * process waits and passes pip's status on. The jailer stops an install
 * with SIGTERM to this process, which kills pip and reaps it: were this
 * process killed first, pip would die an orphan, left to the host's init
 * to reap (a zombie of the installer's UID for as long as that takes). */
static _Noreturn void pip_reaper(const struct config *c, uid_t uid, gid_t gid, int out,
                                 const char *staging)
{
        /* the jailer's descriptors (runs' pipes, channels) are not pip's to
         * hold open */
        fd_close_all_except(3, &out, 1);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, NULL);
        if (unshare(CLONE_NEWPID) < 0)
                _exit(126);
        pid_t pid = fork();
        if (pid < 0)
                _exit(126);
        if (pid == 0)
                pip_child(c, uid, gid, out, staging);
        pip_pid = pid;
        sigaction(SIGTERM, &(struct sigaction){.sa_handler = kill_pip}, NULL);
        sigprocmask(SIG_UNBLOCK, &term, NULL); /* (the jailer's signalfd blocks it) */
        int status = 0;
        if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0)
                _exit(126);
        if (WIFSIGNALED(status))
                _exit(128 + WTERMSIG(status));
        _exit(WEXITSTATUS(status));
}

int deps_pip_start(const struct config *c, uid_t uid, gid_t gid, const char *staging,
                   struct deps_pip *ret)
{
        int out[2];
        if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid == 0)
                pip_reaper(c, uid, gid, out[1], staging);
        close(out[1]);
        if (pid < 0) {
                close(out[0]);
                return -errno;
        }
        *ret = (struct deps_pip){
            .pid = pid, .pidfd = (int)syscall(SYS_pidfd_open, pid, 0), .out = out[0]};
        return 0;
}

void deps_pip_term(const struct deps_pip *p)
{
        syscall(SYS_pidfd_send_signal, p->pidfd, SIGTERM, NULL, 0);
}

void deps_pip_stop(struct deps_pip *p, int wait_ms)
{
        if (p->pid <= 0)
                return;
        /* the reaper kills and reaps pip (see pip_reaper); killed itself
         * only if it has not ended wait_ms later */
        deps_pip_term(p);
        if (poll(&(struct pollfd){p->pidfd, POLLIN, 0}, 1, wait_ms) <= 0)
                syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
}
