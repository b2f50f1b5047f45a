/* lockbox-pyzygote: the template of warm Python runs. Started by the
 * jailer in a mount namespace of its own, it builds the jail's read-only
 * root once, initialises CPython the way `python3 -I -B -u` would, imports
 * warm.python_preload, and then only ever forks: for each SPAWN the child
 * (a child of the jailer, CLONE_PARENT) takes its own namespaces, cgroup,
 * /tmp, /proc, identity and syscall filter, and only then reads its code
 * from fd 3. The zygote never runs a program, never sees a request, and
 * holds nothing secret (it was exec'd: none of the jailer's memory). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "ipc/channel.h"
#include "ipc/zygote_proto.h"
#include "jail/jail.h"
#include "jail/policy.h"
#include "runtime/runtime.h"
#include "zygote/arenas.h"
#include "zygote/thp.h"

#define CTRL_FD 3
#define OPTIONS_FD 6
#define MAX_ITEMS 256

struct args {
        const char *python;
        const char *hostname;
        const char *ro[MAX_ITEMS];
        size_t n_ro;
        const char *preload[MAX_ITEMS];
        size_t n_preload;
        const char *resolv_conf; /* text of the runs' /etc/resolv.conf, or NULL */
};

static struct policy_prog filters[2];
/* Our /proc/self/task, opened before the jail's root hides the host's
 * /proc: a fork is only safe while it holds one entry. */
static int task_dir = -1;
/* The bootstrap, compiled once here rather than in every child (a
 * compile in the child cost ~1 ms of CPU, most of it copy-on-write
 * faults). */
static PyObject *boot_code;

static int parse_args(int argc, char **argv, struct args *a)
{
        static const struct option opts[] = {{"python", required_argument, NULL, 'p'},
                                             {"hostname", required_argument, NULL, 'h'},
                                             {"ro", required_argument, NULL, 'r'},
                                             {"preload", required_argument, NULL, 'm'},
                                             {"log-json", no_argument, NULL, 'j'},
                                             {"resolv-conf", required_argument, NULL, 'd'},
                                             {NULL, 0, NULL, 0}};
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c == 'p')
                        a->python = optarg;
                else if (c == 'h')
                        a->hostname = optarg;
                else if (c == 'r' && a->n_ro < MAX_ITEMS)
                        a->ro[a->n_ro++] = optarg;
                else if (c == 'm' && a->n_preload < MAX_ITEMS)
                        a->preload[a->n_preload++] = optarg;
                else if (c == 'j')
                        log_set_json(true);
                else if (c == 'd')
                        a->resolv_conf = optarg;
                else
                        return -EINVAL;
        }
        return a->python && a->hostname ? 0 : -EINVAL;
}

/* The jailer's compiled filters arrive as memfds on fds 4 and 5. */
static int load_filter(int fd, struct policy_prog *p)
{
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
            size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EINVAL;
        p->insns = malloc((size_t)size);
        if (!p->insns || pread(fd, p->insns, (size_t)size, 0) != size)
                return -EIO;
        p->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
        close(fd);
        return 0;
}

/* The embedded interpreter must be the configured one: the runs of a
 * warm daemon and of a cold one must not differ. */
static bool same_interpreter(const char *python)
{
        char a[PATH_MAX], b[PATH_MAX];
        return realpath(python, a) && realpath(LOCKBOX_PYTHON_EXECUTABLE, b) && strcmp(a, b) == 0;
}

static int python_init(const char *python)
{
        /* As the cold command line does: the locale from LANG (C.UTF-8, set
         * by the jailer), so the streams speak UTF-8. */
        PyPreConfig pre;
        PyPreConfig_InitIsolatedConfig(&pre);
        pre.configure_locale = 1;
        if (PyStatus_Exception(Py_PreInitialize(&pre)))
                return -EINVAL;
        PyConfig config;
        PyConfig_InitIsolatedConfig(&config); /* as -I */
        config.write_bytecode = 0;            /* -B */
        config.buffered_stdio = 0;            /* -u */
        config.parse_argv = 0;
        PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, python);
        char *argv[] = {(char *)"-c"};
        if (!PyStatus_Exception(st))
                st = PyConfig_SetBytesArgv(&config, 1, argv);
        if (!PyStatus_Exception(st))
                st = Py_InitializeFromConfig(&config);
        PyConfig_Clear(&config);
        return PyStatus_Exception(st) ? -EINVAL : 0;
}

/* Run text in a private namespace (nothing lands in __main__). */
static int run_private(const char *text)
{
        PyObject *g = PyDict_New();
        if (!g)
                return -ENOMEM;
        PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins());
        PyObject *r = PyRun_String(text, Py_file_input, g, g);
        Py_DECREF(g);
        if (!r) {
                PyErr_Clear();
                return -EINVAL;
        }
        Py_DECREF(r);
        return 0;
}

/* What each child does in Python before its program, and what it does
 * at its end, costs it a copy-on-write fault for every page of the
 * zygote it writes (~3.5 us each here). With CPython 3.11 (the version
 * whose code this was checked against; others keep everything), the
 * zygote leaves out work that has no effect in its children:
 *  - threading's and logging's after-fork hooks: they make new locks in
 *    place of ones another thread might have held at the fork, and record
 *    which threads survived it. The zygote forks single-threaded (checked
 *    before every fork), from C, with no Python code running and without
 *    PyOS_BeforeFork (see spawn()), so no lock is held, the one thread is
 *    the main one, and its identity does not change; a run can never fork
 *    again (its filter refuses it), so the hooks have no later use.
 *    random's hook (a new seed per child) and any other module's stay.
 *  - logging's at-exit flush of the handlers the preloaded libraries made
 *    (NullHandlers, and handlers writing to the standard streams, which
 *    the bootstrap flushes itself): taken off logging's list, so
 *    logging.shutdown() at a run's end only visits the handlers the
 *    program made.
 * Together ~90 fewer faults per run (of ~500), measured with
 * bench/compare.py's trivial run. */
static void trim_fork_work(void)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
        if (run_private(
                "import sys, threading\n"
                "def _noop():\n"
                "    pass\n"
                "assert threading.active_count() == 1 and not threading._limbo\n"
                "assert threading.current_thread() is threading.main_thread()\n"
                "main = threading.main_thread()\n"
                "assert all(l is main._tstate_lock for l in threading._shutdown_locks)\n"
                "threading._after_fork.__code__ = _noop.__code__\n"
                "logging = sys.modules.get('logging')\n"
                "if logging is not None:\n"
                "    logging._after_at_fork_child_reinit_locks.__code__ = _noop.__code__\n"
                "    std = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)\n"
                "    def _inert(h):\n"
                "        return type(h) is logging.NullHandler or (\n"
                "            type(h) in (logging.StreamHandler, logging._StderrHandler)\n"
                "            and any(h.stream is s for s in std))\n"
                "    logging._handlerList[:] = [r for r in logging._handlerList\n"
                "                               if r() is not None and not _inert(r())]\n") < 0)
                log_warn(NULL, "zygote.fork_work_kept", "%s",
                         "reason=\"threading or logging not as expected\"");
#endif
}

static void preload(const struct args *a)
{
        for (size_t i = 0; i < a->n_preload; i++) {
                PyObject *m = PyImport_ImportModule(a->preload[i]);
                if (!m) {
                        PyErr_Clear();
                        log_warn(NULL, "zygote.preload_failed", "module=%s", log_q(a->preload[i]));
                        continue;
                }
                Py_DECREF(m);
        }
        /* jinja2 compiles its lexer on first use, as Dify's preload knows;
         * then move everything to the permanent generation so the children's
         * garbage collections leave the shared pages alone. */
        run_private("import sys\n"
                    "if 'jinja2' in sys.modules:\n"
                    "    sys.modules['jinja2'].Template('{{s}}').render(s='a')\n");
        trim_fork_work();
        run_private("import gc\n"
                    "gc.collect()\n"
                    "gc.freeze()\n");
}

static int reply(int pid, int error, enum zygote_msg_type type)
{
        struct zygote_reply m = {.magic = ZYGOTE_MAGIC, .type = type, .pid = pid, .error = error};
        return channel_send(CTRL_FD, &m, sizeof(m), NULL, 0);
}

/* A stack-protector canary of the child's own: every warm run would
 * otherwise share the zygote's, and one run that learns it would know
 * every later run's. Safe here because no frame that existed before the
 * fork returns after this: child_run and its callers (spawn, serve, main)
 * never return (the bootstrap ends the process with _exit), and every
 * frame entered from now on reads the new value at entry; threads the
 * program starts copy it. glibc keeps its first byte zero, so a string
 * read cannot reach past it; so does this. x86_64 (%fs:0x28) only. */
static void fresh_stack_guard(void)
{
#if defined(__x86_64__)
        uint64_t v;
        if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
                return;
        v &= ~UINT64_C(0xff);
        __asm__ volatile("movq %0, %%fs:0x28" : : "r"(v) : "memory");
#endif
}

/* In the child, every lock on: the network run's environment (from its
 * SPAWN: NUL-separated NAME=value entries), then the program. The
 * bootstrap ends the process itself. */
static _Noreturn void child_run(const char *net_env, size_t size)
{
        fresh_stack_guard();
        PyOS_AfterFork_Child(); /* re-seeds random and friends */
        PyObject *os = *net_env ? PyImport_ImportModule("os") : NULL; /* nothing to set: no work */
        PyObject *environ = os ? PyObject_GetAttrString(os, "environ") : NULL;
        for (const char *e = net_env; environ && e < net_env + size && *e;
             e += strnlen(e, (size_t)(net_env + size - e)) + 1) {
                if (strnlen(e, (size_t)(net_env + size - e)) == (size_t)(net_env + size - e))
                        break; /* not terminated: never read past the message */
                const char *eq = strchr(e, '=');
                if (!eq)
                        continue;
                PyObject *k = PyUnicode_FromStringAndSize(e, eq - e);
                PyObject *v = PyUnicode_FromString(eq + 1);
                if (k && v)
                        PyObject_SetItem(environ, k, v);
                Py_XDECREF(k);
                Py_XDECREF(v);
        }
        Py_XDECREF(environ);
        Py_XDECREF(os);
        PyErr_Clear();
        PyObject *main = PyImport_AddModule("__main__"); /* borrowed */
        PyObject *g = main ? PyModule_GetDict(main) : NULL;
        PyObject *r = g ? PyEval_EvalCode(boot_code, g, g) : NULL;
        if (!r)
                PyErr_Print();
        _exit(1); /* the bootstrap always exits; this is not reached */
}

static struct jail_spec spawn_spec(const struct args *a, const struct zygote_spawn *m,
                                   const struct zygote_fds *f)
{
        struct jail_spec s = {
            .mode = JAIL_WARM,
            .uid = m->uid,
            .gid = m->uid,
            .network = m->network,
            .hostname = a->hostname,
            .limits = m->limits,
            .sync_fd = f->sync,
            .code_fd = f->code,
            .stdout_fd = f->out,
            .stderr_fd = f->err,
            .report_fd = f->report,
            .deps_fd = f->deps,
            .netns_fd = f->netns,
            .filter = &filters[m->network ? 1 : 0],
            .cgroup_procs = {f->cgroup_procs[0], f->cgroup_procs[1]},
            .cgroup_dirfd = f->cgroup_dirfd,
        };
        return s;
}

/* Threads of this process, from its task directory; -1 if unknown. */
static int count_threads(void)
{
        char buf[4096];
        int n = 0;
        if (task_dir < 0 || lseek(task_dir, 0, SEEK_SET) < 0)
                return -1;
        for (;;) {
                long got = syscall(SYS_getdents64, task_dir, buf, sizeof(buf));
                if (got < 0)
                        return -1;
                if (got == 0)
                        return n;
                for (long off = 0; off < got;) {
                        struct {
                                uint64_t ino;
                                int64_t off;
                                unsigned short reclen;
                                unsigned char type;
                                char name[];
                        } *d = (void *)(buf + off);
                        n += d->name[0] != '.';
                        off += d->reclen;
                }
        }
}

/* PyOS_BeforeFork and PyOS_AfterFork_Parent take and give back the
 * import lock and run the before/after-in-parent hooks (logging's takes
 * its module lock), so that no other thread is half-way through them at
 * the fork. The zygote has no other thread and runs no Python code
 * between forks, so with 3.11 (whose PyOS_AfterFork_Child re-creates the
 * import lock whether or not it was taken) it leaves them out: running
 * them wrote to the zygote's own pages after every fork, a copy-on-write
 * fault each while armed children share them, which split its huge
 * pages one by one and made every later fork dearer. Later versions
 * (3.13 unlocks in the child what BeforeFork locked) keep both calls. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
static void fork_prepare(void)
{
}
static void fork_parent(void)
{
}
#else
static void fork_prepare(void)
{
        PyOS_BeforeFork();
}
static void fork_parent(void)
{
        PyOS_AfterFork_Parent();
}
#endif

static void spawn(const struct args *a, const struct zygote_spawn *m, int *fds, size_t nf)
{
        char err[200] = "";
        int r = -EINVAL, pid = 0;
        struct zygote_fds f;
        if (zygote_fds_decode(m, fds, nf, &f) == 0) {
                struct jail_spec s = spawn_spec(a, m, &f);
                struct jail_started st;
                if (count_threads() != 1) {
                        /* a thread (a preloaded module's?) would be half a
                         * process in the child: never fork like this */
                        log_error(NULL, "zygote.threads", "count=%d", count_threads());
                        _exit(1);
                }
                fork_prepare();
                r = jail_start(&s, true, &st, err, sizeof(err));
                if (r == 1)
                        child_run(m->network ? m->net_env : "", sizeof(m->net_env));
                fork_parent();
                if (r == 0) {
                        pid = st.pid;
                        close(st.pidfd);
                }
        }
        for (size_t i = 0; i < nf; i++)
                close(fds[i]);
        reply(pid, r < 0 ? -r : 0, ZYGOTE_SPAWNED);
}

static int serve(const struct args *a)
{
        for (;;) {
                struct zygote_spawn m;
                int fds[ZYGOTE_SPAWN_MAX_FDS];
                size_t nf = 0;
                struct pollfd p = {.fd = CTRL_FD, .events = POLLIN};
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        return 1;
                int r = channel_recv(CTRL_FD, &m, sizeof(m), fds, ELEMENTSOF(fds), &nf);
                if (r == -EAGAIN || r == -EINTR)
                        continue;
                if (r <= 0)
                        return r == 0 ? 0 : 1; /* the jailer went away */
                if (m.magic != ZYGOTE_MAGIC || m.type != ZYGOTE_SPAWN) {
                        for (size_t i = 0; i < nf; i++)
                                close(fds[i]);
                        return 1;
                }
                spawn(a, &m, fds, nf);
                /* a network run's proxy settings: not for later forks */
                explicit_bzero(&m, sizeof(m));
        }
}

static int setup(const struct args *a)
{
        struct policy_prog own;
        int r;
        /* read before the jail's root hides /sys */
        enum thp_mode thp = thp_mode_read();
        if ((r = load_filter(4, &filters[0])) < 0 || (r = load_filter(5, &filters[1])) < 0)
                return r;
        task_dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (task_dir < 0)
                return -errno;
        if ((r = jail_root_build(a->ro, a->n_ro, a->hostname, a->resolv_conf)) < 0 ||
            (r = jail_root_enter()) < 0 || chdir("/") < 0)
                return r < 0 ? r : -errno;
        if (thp != THP_NEVER)
                arenas_install();
        if ((r = python_init(a->python)) < 0)
                return r;
        boot_code = Py_CompileString(runtime_python_boot, "<string>", Py_file_input);
        if (!boot_code)
                return -EINVAL;
        preload(a);
        arenas_seal();
        /* The interpreter's anonymous memory on huge pages, unless the
         * host said never. */
        unsigned long huge = thp != THP_NEVER ? thp_collapse() : 0;
        log_info(NULL, "zygote.thp", "mode=%s huge_bytes=%lu", thp_mode_name(thp), huge);
        if ((r = policy_build_zygote(&own)) < 0)
                return r;
        struct sock_fprog prog = {.len = own.len, .filter = own.insns};
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                return -errno;
        policy_prog_free(&own);
        return 0;
}

/* The options the jailer wrote to fd 6 (NUL-terminated strings), as an
 * argv after ours: they never appear in our command line, which warm runs
 * could read. */
static char **options_from_fd(char *argv0, int *ret_argc)
{
        static char buf[1 << 20];
        static char *av[2 * MAX_ITEMS + 16];
        size_t len = 0;
        ssize_t n;
        while (len < sizeof(buf) - 1 &&
               (n = read(OPTIONS_FD, buf + len, sizeof(buf) - 1 - len)) > 0)
                len += (size_t)n;
        close(OPTIONS_FD);
        buf[len] = '\0';
        int ac = 0;
        av[ac++] = argv0;
        for (size_t off = 0; off < len && ac < (int)ELEMENTSOF(av) - 1;
             off += strlen(buf + off) + 1)
                av[ac++] = buf + off;
        av[ac] = NULL;
        *ret_argc = ac;
        return av;
}

int main(int argc, char **argv)
{
        struct args a = {0};
        /* The jailer sets it so that the dynamic linker binds every symbol
         * of libc and libpython now, once, rather than in each child at its
         * first call (~12 faults per run); the runs' environment does not
         * have it. */
        unsetenv("LD_BIND_NOW");
        log_setup("zygote", false, -1);
        if (argc == 1)
                argv = options_from_fd(argv[0], &argc);
        if (parse_args(argc, argv, &a) < 0) {
                log_error(NULL, "zygote.usage", "%s", "msg=\"started by lockboxd only\"");
                return 2;
        }
        if (!same_interpreter(a.python))
                return ZYGOTE_EXIT_MISMATCH;
        int r = setup(&a);
        if (r < 0) {
                log_error(NULL, "zygote.setup_failed", "error=%s", log_q(strerror(-r)));
                return 1;
        }
        if (reply(getpid(), 0, ZYGOTE_READY) < 0)
                return 1;
        return serve(&a);
}
