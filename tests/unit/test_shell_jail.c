/* A shell job's two jail layers of src/jail/ with real programs (as root):
 * the shell filter (policy_build_shell), loaded with a listener this test
 * holds as a job's keeper would, under which sh, bash on a pty, git, cc
 * and make, Python (threads, subprocess, venv, pip) and Node.js
 * (child_process, npm) must work while hostile calls reach the listener
 * named or fail with EPERM; and the path rules (landlock_restrict_paths).
 * Each job runs in a PID namespace of its own, as an unprivileged UID,
 * bounded in processes, address space, CPU and wall-clock time. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "base/clock.h"
#include "ipc/channel.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/policy.h"
#include "test.h"

/* No account has it and nothing else runs as it, so RLIMIT_NPROC counts
 * this test's processes alone. */
#define JOB_UID 64731
#define JOB_NPROC 64
#define JOB_AS (4ULL << 30) /* Node.js reserves address space up front */
#define JOB_SECONDS 30

#define JOB_PATH "PATH=/usr/local/bin:/usr/bin:/bin"

struct job {
        /* set by the caller */
        const char *dir;         /* working directory and HOME, the job's */
        const char *const *argv; /* the program, or NULL to call body */
        int (*body)(void);       /* C code run under the filter (hostile calls) */
        bool network;            /* the filter's network option */
        int tty;                 /* a pty master to run on, or -1 for a pipe */
        /* results */
        pid_t pid;       /* the job's init; killing it ends the job */
        int status;      /* exit code, 128+signal, or -1 (timed out) */
        char denied[64]; /* the call the filter routed to the keeper */
        char out[65536]; /* output, NUL-terminated (the rest dropped) */
        size_t n_out;
};

static struct policy_prog shell_filter(bool network)
{
        struct policy_shell_opts o = {.network = network};
        struct policy_prog p = {0};
        if (policy_build_shell(&o, &p) < 0)
                abort();
        return p;
}

/* The program's process: its terminal or pipe, limits, an unprivileged
 * identity, no_new_privs, the filter with a listener for the keeper, then
 * the program. Failing steps exit 120 + step. */
static _Noreturn void job_exec(struct job *j, int out_w, int sock, const struct policy_prog *p)
{
        if (j->tty >= 0) {
                int s = setsid() < 0 ? -1 : open(ptsname(j->tty), O_RDWR);
                if (s < 0 || ioctl(s, TIOCSCTTY, 0) < 0 || dup2(s, 0) < 0 || dup2(s, 1) < 0 ||
                    dup2(s, 2) < 0)
                        _exit(121);
                close(s);
                close(j->tty);
        } else {
                int n = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (n < 0 || dup2(n, 0) < 0 || dup2(out_w, 1) < 0 || dup2(out_w, 2) < 0)
                        _exit(121);
                close(n);
        }
        struct rlimit np = {JOB_NPROC, JOB_NPROC}, as = {JOB_AS, JOB_AS},
                      cpu = {JOB_SECONDS, JOB_SECONDS};
        if (chdir(j->dir) < 0 || setrlimit(RLIMIT_NPROC, &np) < 0 ||
            setrlimit(RLIMIT_AS, &as) < 0 || setrlimit(RLIMIT_CPU, &cpu) < 0)
                _exit(122);
        if (setgroups(0, NULL) < 0 || setresgid(JOB_UID, JOB_UID, JOB_UID) < 0 ||
            setresuid(JOB_UID, JOB_UID, JOB_UID) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(123);
        struct sock_fprog fp = {.len = p->len, .filter = p->insns};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(124);
        int l = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                             &fp);
        int r = l < 0 ? -errno : channel_send(sock, "L", 1, &l, 1);
        if (r < 0) {
                fprintf(stderr, "listener: %s\n", strerror(-r));
                _exit(125);
        }
        close(l);
        close(sock);
        if (!j->argv)
                _exit(j->body());
        char home[256], tmp[256];
        snprintf(home, sizeof(home), "HOME=%s", j->dir);
        snprintf(tmp, sizeof(tmp), "TMPDIR=%s", j->dir);
        const char *envp[] = {JOB_PATH,
                              home,
                              tmp,
                              "LANG=C.UTF-8",
                              "TERM=xterm",
                              "GIT_CONFIG_NOSYSTEM=1",
                              "NPM_CONFIG_UPDATE_NOTIFIER=false",
                              "PIP_DISABLE_PIP_VERSION_CHECK=1",
                              NULL};
        execve(j->argv[0], (char *const *)j->argv, (char *const *)envp);
        _exit(126);
}

/* The job's init in its own PID namespace: reaps until the program is
 * gone and exits as it did; the namespace (background jobs included) dies
 * with it. */
static _Noreturn void job_init(struct job *j, int out_w, int sock, const struct policy_prog *p)
{
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(120);
        pid_t prog = fork();
        if (prog < 0)
                _exit(120);
        if (prog == 0)
                job_exec(j, out_w, sock, p);
        for (;;) {
                int st;
                pid_t w = wait(&st);
                if (w < 0 && errno != EINTR)
                        _exit(120);
                if (w == prog)
                        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
}

static void job_read(struct job *j, int fd, bool *open_)
{
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
                *open_ = n < 0 && errno == EINTR; /* EOF, or EIO from a pty whose end closed */
                return;
        }
        size_t room = sizeof(j->out) - 1 - j->n_out;
        size_t k = (size_t)n < room ? (size_t)n : room;
        memcpy(j->out + j->n_out, buf, k);
        j->n_out += k;
        j->out[j->n_out] = '\0';
}

/* A notification is a forbidden call: name it and end the job, as the
 * jailer does. */
static void job_denied(struct job *j, int listener)
{
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        if (seccomp_notify_alloc(&req, &resp) < 0)
                abort();
        if (seccomp_notify_receive(listener, req) == 0) {
                char *name = policy_syscall_name(req->data.nr);
                if (!j->denied[0])
                        snprintf(j->denied, sizeof(j->denied), "%s", name ? name : "?");
                free(name);
                kill(j->pid, SIGKILL);
        }
        seccomp_notify_free(req, resp);
}

/* Keep the job: its output, its notifications, its end, within JOB_SECONDS. */
static void job_watch(struct job *j, int out, int listener, int pidfd)
{
        int64_t deadline = monotonic_ms() + JOB_SECONDS * 1000;
        bool out_open = true, exited = false;
        while (out_open || !exited) {
                struct pollfd pf[3] = {{out_open ? out : -1, POLLIN, 0},
                                       {listener, POLLIN, 0},
                                       {exited ? -1 : pidfd, POLLIN, 0}};
                int64_t now = monotonic_ms();
                if (now >= deadline) {
                        fprintf(stderr, "  job still running after %d s: killed\n", JOB_SECONDS);
                        kill(j->pid, SIGKILL);
                        waitpid(j->pid, NULL, 0);
                        j->status = -1;
                        return;
                }
                if (poll(pf, 3, (int)(deadline - now)) < 0 && errno != EINTR)
                        abort();
                if (pf[1].revents & POLLIN)
                        job_denied(j, listener);
                else if (pf[1].revents)
                        listener = -1; /* no filtered task left */
                if (pf[0].revents)
                        job_read(j, out, &out_open);
                if (pf[2].revents) {
                        int st;
                        if (waitpid(j->pid, &st, 0) != j->pid)
                                abort();
                        exited = true;
                        j->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                }
        }
}

/* Run a job to its end; j->status, j->denied and j->out tell how it went. */
static void job_run(struct job *j)
{
        struct policy_prog p = shell_filter(j->network);
        int sv[2], pipefd[2] = {-1, -1};
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
            (j->tty < 0 && pipe2(pipefd, O_CLOEXEC) < 0))
                abort();
        fflush(NULL);
        j->pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
        if (j->pid < 0)
                abort();
        if (j->pid == 0) {
                close(sv[0]);
                job_init(j, pipefd[1], sv[1], &p);
        }
        close(sv[1]);
        if (pipefd[1] >= 0)
                close(pipefd[1]);
        int pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
        if (pidfd < 0)
                abort();
        /* the listener, or EOF when the job failed before its filter (its
         * status then says where) */
        struct pollfd pf = {sv[0], POLLIN, 0};
        char m;
        int listener = -1;
        size_t n_fds = 0;
        if (poll(&pf, 1, JOB_SECONDS * 1000) != 1 ||
            channel_recv(sv[0], &m, 1, &listener, 1, &n_fds) != 1 || n_fds != 1)
                listener = -1;
        close(sv[0]);
        job_watch(j, j->tty >= 0 ? j->tty : pipefd[0], listener, pidfd);
        if (listener >= 0)
                close(listener);
        if (pipefd[0] >= 0)
                close(pipefd[0]);
        close(pidfd);
        policy_prog_free(&p);
}

/* A directory of the job's own under /tmp; removed by job_dir_remove. */
static void job_dir_make(char *dir, size_t len)
{
        snprintf(dir, len, "/tmp/lockbox-shjail-XXXXXX");
        if (!mkdtemp(dir) || chown(dir, JOB_UID, JOB_UID) < 0)
                abort();
}

static void job_dir_remove(const char *dir)
{
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "  could not remove %s\n", dir);
}

/* Run `sh -c script` as a job in a directory of its own; j->status,
 * j->denied and j->out tell how it went. */
static void run_script(struct job *j, const char *script)
{
        static char dir[64];
        job_dir_make(dir, sizeof(dir));
        const char *argv[] = {"/bin/sh", "-c", script, NULL};
        *j = (struct job){.dir = dir, .argv = argv, .tty = -1};
        job_run(j);
        job_dir_remove(dir);
}

/* run_script for a script that must succeed: what went wrong, if it did. */
static void run_script_ok(struct job *j, const char *script)
{
        run_script(j, script);
        if (j->status != 0 || j->denied[0])
                fprintf(stderr, "  exit %d, denied '%s', output:\n%s\n", j->status, j->denied,
                        j->out);
}

static struct job job; /* 64 KiB of output: not on the stack */

TEST(shell_jail_sh_pipes_background_jobs_wait_and_traps)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        run_script_ok(&job, "set -e\n"
                            "echo \"$(printf 'a\\nb\\nc\\n' | tr a-z A-Z | sort -r | head -n 2 | "
                            "tr '\\n' ' ')\"\n"
                            "sleep 0.2 & a=$!\n"
                            "(exit 3) & b=$!\n"
                            "wait $a; echo a=$?\n"
                            "wait $b || echo b=$?\n"
                            "trap 'echo trapped' USR1\n"
                            "kill -USR1 $$\n"
                            "echo done\n");
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_EQ(job.out, "C B \na=0\nb=3\ntrapped\ndone\n");
}

TEST(shell_jail_interactive_bash_on_a_pty_has_job_control)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        /* The keeper's side: a pty whose size the API set. */
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        EXPECT_TRUE(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0);
        struct winsize ws = {.ws_row = 33, .ws_col = 101};
        EXPECT_INT_EQ(ioctl(m, TIOCSWINSZ, &ws), 0);
        char dir[64];
        job_dir_make(dir, sizeof(dir));
        /* stty size: TIOCGWINSZ. fg: TIOCSPGRP gives the job the terminal,
         * and only then may its stty change the modes (TCSETS); from the
         * background it would be stopped by SIGTTOU. less reads /dev/tty
         * with TCGETS/TCSETS. */
        const char *argv[] = {"/bin/bash",
                              "--norc",
                              "--noprofile",
                              "-i",
                              "-c",
                              "stty size; (sleep 0.2; stty -echo; stty echo; echo fg-job-ok) & "
                              "fg %1 >/dev/null; echo fg=$?; "
                              "printf 'less-ok\\n' | less -FX; exit 0",
                              NULL};
        job = (struct job){.dir = dir, .argv = argv, .tty = m};
        job_run(&job);
        close(m);
        job_dir_remove(dir);
        if (job.status != 0 || job.denied[0])
                fprintf(stderr, "  output:\n%s\n", job.out);
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_CONTAINS(job.out, "33 101\r\n");
        EXPECT_STR_CONTAINS(job.out, "fg-job-ok\r\nfg=0\r\n");
        EXPECT_STR_CONTAINS(job.out, "less-ok");
        EXPECT_STR_NOT_CONTAINS(job.out, "no job control");
        EXPECT_STR_NOT_CONTAINS(job.out, "cannot set terminal process group");
        EXPECT_STR_NOT_CONTAINS(job.out, "Operation not permitted");
}

TEST(shell_jail_git_init_and_commit)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        run_script_ok(&job, "set -e\n"
                            "mkdir repo && cd repo\n"
                            "git init -q\n"
                            "git config user.name Test && git config user.email t@example.invalid\n"
                            "echo hello > f && git add f && git commit -q -m first\n"
                            "git log --format=%s\n");
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_EQ(job.out, "first\n");
}

TEST(shell_jail_make_and_cc_build_and_run_a_program)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        run_script_ok(&job, "set -e\n"
                            "cat > hello.c <<'EOF'\n"
                            "#include <pthread.h>\n"
                            "#include <stdio.h>\n"
                            "static void *run(void *a) { return a; }\n"
                            "int main(void) { pthread_t t; pthread_create(&t, 0, run, 0);\n"
                            "  pthread_join(t, 0); puts(\"hello from cc\"); return 0; }\n"
                            "EOF\n"
                            "printf 'hello: hello.c\\n\\tcc -O1 -pthread -o $@ $<\\n' > Makefile\n"
                            "make -s\n"
                            "./hello\n");
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_EQ(job.out, "hello from cc\n");
}

TEST(shell_jail_python_threads_subprocess_and_asyncio)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        run_script_ok(&job, "/usr/bin/python3 -c '\n"
                            "import asyncio, concurrent.futures, subprocess\n"
                            "with concurrent.futures.ThreadPoolExecutor(4) as ex:\n"
                            "    total = sum(ex.map(lambda n: n * n, range(100)))\n"
                            "out = subprocess.run([\"/bin/sh\", \"-c\", \"echo sub\"],\n"
                            "    capture_output=True, text=True, check=True).stdout.strip()\n"
                            "async def child():\n"
                            "    p = await asyncio.create_subprocess_exec(\"/bin/echo\", \"aio\",\n"
                            "        stdout=asyncio.subprocess.PIPE)\n"
                            "    return (await p.communicate())[0].decode().strip()\n"
                            "print(\"py\", total, out, asyncio.run(child()))\n"
                            "'\n");
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_EQ(job.out, "py 328350 sub aio\n");
}

/* a venv's pip starts a second interpreter that imports much: 3-9 s here */
TEST_SLOW(shell_jail_python_venv_and_pip, 30)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        run_script_ok(&job, "set -e\n"
                            "/usr/bin/python3 -m venv \"$HOME/venv\"\n"
                            "\"$HOME/venv/bin/python3\" -m pip --version\n");
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_CONTAINS(job.out, "pip ");
        EXPECT_STR_CONTAINS(job.out, "/venv/lib/python3");
}

TEST(shell_jail_node_child_process_and_npm)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        run_script_ok(
            &job, "set -e\n"
                  "node -e '\n"
                  "const cp = require(\"child_process\");\n"
                  "const out = cp.execFileSync(\"/bin/sh\", [\"-c\", \"echo child\"]);\n"
                  "cp.exec(\"echo async\", (err, so) => {\n"
                  "  if (err) throw err;\n"
                  "  console.log(\"node\", out.toString().trim(), so.trim());\n"
                  "});'\n"
                  "v=$(npm --version)\n"
                  "case $v in [0-9]*.[0-9]*.[0-9]*) echo npm ok;; *) echo \"npm: $v\";; esac\n");
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
        EXPECT_STR_EQ(job.out, "node child async\nnpm ok\n");
}

/* ---- hostile calls: each must reach the keeper, named ---- */

static int do_ptrace(void)
{
        return (int)syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
}
static int do_unshare(void)
{
        return (int)syscall(SYS_unshare, CLONE_NEWUSER);
}
static int do_mount(void)
{
        return (int)syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL);
}
static int do_keyctl(void)
{
        return (int)syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
}
static int do_bpf(void)
{
        return (int)syscall(SYS_bpf, 0, NULL, 0);
}
static int do_clone_newns(void)
{
        return (int)syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
}
static int do_personality(void)
{
        return (int)syscall(SYS_personality, 0x0100000UL /* MMAP_PAGE_ZERO */);
}
static int do_kcmp(void)
{
        return (int)syscall(SYS_kcmp, getpid(), 1, 0 /* KCMP_FILE */, 0, 0);
}

static void expect_named(int (*body)(void), const char *name)
{
        char dir[64];
        job_dir_make(dir, sizeof(dir));
        job = (struct job){.dir = dir, .body = body, .tty = -1};
        job_run(&job);
        job_dir_remove(dir);
        if (strcmp(job.denied, name) != 0)
                test_fail(__FILE__, __LINE__, "%s: denied '%s', exit %d, want '%s' named", name,
                          job.denied, job.status, name);
        else if (job.status != 128 + SIGKILL)
                test_fail(__FILE__, __LINE__, "%s: named but the job ended with %d", name,
                          job.status);
}

TEST(shell_jail_hostile_calls_reach_the_keeper_named)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        expect_named(do_ptrace, "ptrace");
        expect_named(do_unshare, "unshare");
        expect_named(do_mount, "mount");
        expect_named(do_keyctl, "keyctl");
        expect_named(do_bpf, "bpf");
        expect_named(do_clone_newns, "clone");
        expect_named(do_personality, "personality");
        expect_named(do_kcmp, "kcmp");
}

TEST(shell_jail_hostile_program_is_named)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        /* the filter outlives exec: util-linux's unshare, from a shell */
        run_script(&job, "echo before; unshare --user /bin/true; echo after\n");
        EXPECT_STR_EQ(job.denied, "unshare");
        EXPECT_INT_EQ(job.status, 128 + SIGKILL);
        EXPECT_STR_EQ(job.out, "before\n");
}

#define REFUSED(expr, e)                                                                           \
        do {                                                                                       \
                errno = 0;                                                                         \
                if ((expr) != -1 || errno != (e)) {                                                \
                        fprintf(stderr, "  %s: errno %d, want %d\n", #expr, errno, (e));           \
                        bad++;                                                                     \
                }                                                                                  \
        } while (0)

static int do_refused_probes(void)
{
        int bad = 0;
        /* typing into its own terminal */
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
                return 100;
        int s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
        char c = 'x';
        REFUSED(ioctl(s, TIOCSTI, &c), EPERM);
        /* sudo-like probes and host administration */
        REFUSED(setuid(0), EPERM);
        REFUSED(setgroups(0, NULL), EPERM);
        REFUSED(sethostname("x", 1), EPERM);
        /* no network in this job, and never a packet socket */
        REFUSED(socket(AF_INET, SOCK_STREAM, 0), EPERM);
        REFUSED(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
        return bad;
}

TEST(shell_jail_refused_probes_fail_with_eperm_and_the_job_goes_on)
{
        REQUIRE_ROOT("the job runs as another UID in a PID namespace of its own");
        char dir[64];
        job_dir_make(dir, sizeof(dir));
        job = (struct job){.dir = dir, .body = do_refused_probes, .tty = -1};
        job_run(&job);
        job_dir_remove(dir);
        if (job.out[0])
                fprintf(stderr, "%s", job.out);
        EXPECT_STR_EQ(job.denied, "");
        EXPECT_INT_EQ(job.status, 0);
}

/* ---- Landlock: landlock_restrict_paths ---- */

static char ll_dir[64];     /* rw */
static char ll_outside[96]; /* a file in /var/tmp that must never appear */
static char ll_script[96];  /* a program outside the rules: `exit 7` */

#define LL_CHECK(cond)                                                                             \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "  landlock: %s (errno %d)\n", #cond, errno);              \
                        bad++;                                                                     \
                }                                                                                  \
        } while (0)

static int landlocked_checks(void)
{
        int bad = 0;
        char path[160];
        /* root, so only Landlock stands in the way of these */
        errno = 0;
        LL_CHECK(open("/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC) < 0 && errno == EACCES);
        errno = 0;
        LL_CHECK(open(ll_outside, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) < 0 &&
                 errno == EACCES);
        errno = 0;
        LL_CHECK(open("/etc/passwd", O_WRONLY | O_CLOEXEC) < 0 && errno == EACCES);
        int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
        LL_CHECK(fd >= 0);
        close(fd);
        /* its own directory: create, write, truncate, rename, remove */
        snprintf(path, sizeof(path), "%s/f", ll_dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        LL_CHECK(fd >= 0 && write(fd, "x", 1) == 1 && ftruncate(fd, 0) == 0);
        close(fd);
        char sub[160], moved[192];
        snprintf(sub, sizeof(sub), "%s/d", ll_dir);
        snprintf(moved, sizeof(moved), "%s/d/g", ll_dir);
        LL_CHECK(mkdir(sub, 0700) == 0 && rename(path, moved) == 0 && unlink(moved) == 0 &&
                 rmdir(sub) == 0);
        /* the rw device, with O_TRUNC as `> /dev/null` opens it */
        fd = open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC);
        LL_CHECK(fd >= 0);
        close(fd);
        errno = 0;
        LL_CHECK(open("/dev/full", O_WRONLY | O_CLOEXEC) < 0 && errno == EACCES);
        /* signals stay inside the domain where the kernel scopes them */
        if (landlock_abi() >= 6) {
                errno = 0;
                LL_CHECK(kill(getppid(), 0) < 0 && errno == EPERM);
        }
        /* executing: /bin/sh from the read-only tree, which writes in its
         * directory; not a program outside the rules (this test's own) */
        char cmd[192];
        snprintf(cmd, sizeof(cmd), "echo ok > %s/sh-wrote", ll_dir);
        pid_t pid = fork();
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        int st;
        LL_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        pid = fork();
        if (pid == 0) {
                execl(ll_script, ll_script, (char *)NULL);
                _exit(errno == EACCES ? 0 : 1);
        }
        LL_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        return bad;
}

TEST(shell_jail_landlock_paths_confine_even_root)
{
        REQUIRE_ROOT("root's own access is what Landlock must take away");
        snprintf(ll_dir, sizeof(ll_dir), "/tmp/lockbox-shll-XXXXXX");
        EXPECT_NOT_NULL(mkdtemp(ll_dir));
        snprintf(ll_outside, sizeof(ll_outside), "/var/tmp/lockbox-shll-%d", (int)getpid());
        snprintf(ll_script, sizeof(ll_script), "/var/tmp/lockbox-shll-%d.sh", (int)getpid());
        int sfd = open(ll_script, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        EXPECT_TRUE(sfd >= 0);
        EXPECT_INT_EQ(write(sfd, "#!/bin/sh\nexit 7\n", 18), 18);
        close(sfd);
        pid_t pid = fork();
        if (pid == 0) {
                const char *rw[] = {ll_dir};
                const char *ro[] = {
                    "/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", "/nonexistent-lockbox"};
                const char *dev[] = {"/dev/null", "/dev/nonexistent-lockbox"};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        _exit(100);
                int r = landlock_restrict_paths(rw, 1, ro, 7, dev, 2, true);
                if (r == -EOPNOTSUPP)
                        _exit(101);
                if (r < 0) {
                        fprintf(stderr, "  landlock_restrict_paths: %s\n", strerror(-r));
                        _exit(102);
                }
                _exit(landlocked_checks());
        }
        int st = 0;
        EXPECT_INT_EQ(waitpid(pid, &st, 0), pid);
        bool outside_made = unlink(ll_outside) == 0;
        unlink(ll_script);
        char wrote[128];
        snprintf(wrote, sizeof(wrote), "%s/sh-wrote", ll_dir);
        bool sh_wrote = access(wrote, F_OK) == 0;
        job_dir_remove(ll_dir);
        EXPECT_TRUE(WIFEXITED(st));
        if (WEXITSTATUS(st) == 101) {
                /* a kernel without Landlock: nothing done, and said so */
                EXPECT_TRUE(landlock_abi() < 0);
                return;
        }
        EXPECT_INT_EQ(WEXITSTATUS(st), 0);
        EXPECT_FALSE(outside_made);
        EXPECT_TRUE(sh_wrote);
}

/* ---- a save's reading right (jail_userns_read_all) ------------------------ */

static char rd_dir[64];

#define RD_CHECK(cond)                                                                             \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "  read_all: %s (errno %d)\n", #cond, errno);              \
                        bad++;                                                                     \
                }                                                                                  \
        } while (0)

/* As JOB_UID in its namespace: what it owns it reads, however closed, and
 * nothing more. */
static int read_all_checks(void)
{
        int bad = 0;
        char p[128], buf[16] = "";
        snprintf(p, sizeof(p), "%s/closed/file", rd_dir);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        RD_CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == 6 && memcmp(buf, "closed", 6) == 0);
        if (fd >= 0)
                close(fd);
        snprintf(p, sizeof(p), "%s/closed", rd_dir);
        fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        RD_CHECK(fd >= 0);
        if (fd >= 0)
                close(fd);
        /* no write, no mode or owner change beyond an owner's, no mount */
        snprintf(p, sizeof(p), "%s/closed/file", rd_dir);
        RD_CHECK(open(p, O_WRONLY | O_CLOEXEC) < 0 && errno == EACCES);
        snprintf(p, sizeof(p), "%s/closed/new", rd_dir);
        RD_CHECK(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) < 0 && errno == EACCES);
        snprintf(p, sizeof(p), "%s/root-only", rd_dir);
        RD_CHECK(open(p, O_RDONLY | O_CLOEXEC) < 0 && errno == EACCES);
        RD_CHECK(chown(rd_dir, 0, 0) < 0 && (errno == EPERM || errno == EINVAL));
        RD_CHECK(mount("none", rd_dir, "tmpfs", 0, NULL) < 0 && errno == EPERM);
        /* CAP_DAC_READ_SEARCH (2) alone */
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        bool seen = false;
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "CapEff:", 7) == 0 || strncmp(line, "CapPrm:", 7) == 0 ||
                    strncmp(line, "CapBnd:", 7) == 0) {
                        RD_CHECK(strstr(line, "0000000000000004") != NULL);
                        seen = true;
                }
        if (f)
                fclose(f);
        RD_CHECK(seen);
        return bad;
}

TEST(shell_jail_a_save_reads_what_its_uid_closed_and_nothing_more)
{
        REQUIRE_ROOT("the worker leaves UID 0 for a job's UID first");
        job_dir_make(rd_dir, sizeof(rd_dir));
        EXPECT_INT_EQ(chmod(rd_dir, 0755), 0);
        char p[128];
        snprintf(p, sizeof(p), "%s/closed", rd_dir);
        EXPECT_INT_EQ(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/closed/file", rd_dir);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
        EXPECT_TRUE(fd >= 0 && write(fd, "closed", 6) == 6);
        close(fd);
        EXPECT_INT_EQ(chown(p, JOB_UID, JOB_UID), 0);
        snprintf(p, sizeof(p), "%s/closed", rd_dir);
        EXPECT_INT_EQ(chown(p, JOB_UID, JOB_UID), 0);
        EXPECT_INT_EQ(chmod(p, 0), 0);
        snprintf(p, sizeof(p), "%s/root-only", rd_dir);
        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        EXPECT_TRUE(fd >= 0);
        close(fd);
        pid_t pid = fork();
        if (pid == 0) {
                if (jail_identity_drop(JOB_UID, JOB_UID) < 0)
                        _exit(100);
                int r = jail_userns_read_all(JOB_UID, JOB_UID);
                if (r == 1)
                        _exit(101);
                if (r < 0) {
                        fprintf(stderr, "  jail_userns_read_all: %s\n", strerror(-r));
                        _exit(102);
                }
                _exit(read_all_checks());
        }
        int st = 0;
        EXPECT_INT_EQ(waitpid(pid, &st, 0), pid);
        snprintf(p, sizeof(p), "%s/closed", rd_dir);
        struct stat sb;
        EXPECT_TRUE(stat(p, &sb) == 0 && (sb.st_mode & 07777) == 0); /* no mode lent */
        job_dir_remove(rd_dir);
        EXPECT_TRUE(WIFEXITED(st));
        if (WEXITSTATUS(st) == 101)
                return; /* no user namespaces on this system: nothing changed */
        EXPECT_INT_EQ(WEXITSTATUS(st), 0);
}
