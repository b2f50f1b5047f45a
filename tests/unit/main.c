/* Unit-test runner: forks one process per registered case, each with a
 * time limit (alarm), reports each failure with its messages, and prints
 * "N passed, N failed" last (a case that needs root, run by another
 * user, is skipped with its reason and counted before that line). An
 * optional argument runs only the cases whose name contains it. The case table grows as cases
 * register; a case that cannot be registered stops the runner before anything runs. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "test.h"

/* Seconds a case may take; LOCKBOX_UNIT_TIMEOUT overrides (slow builds). */
#define CASE_TIMEOUT_S 10
/* A case's exit status when it skipped itself (as automake's). */
#define CASE_SKIPPED 77

struct test_case {
        const char *name;
        const char *file;
        test_fn fn;
        unsigned seconds; /* 0: the runner's timeout */
};

static struct test_case *cases;
static size_t n_cases, cap_cases;
bool test_failed;

void test_register_slow(const char *name, test_fn fn, const char *file, unsigned seconds)
{
        if (n_cases == cap_cases) {
                size_t ncap = cap_cases ? cap_cases * 2 : 256;
                struct test_case *n = realloc(cases, ncap * sizeof(*n));
                if (!n) {
                        /* Constructors run before main: say which case is lost and stop. */
                        fprintf(stderr, "unit_tests: out of memory registering %s (%s)\n", name,
                                file);
                        abort();
                }
                cases = n;
                cap_cases = ncap;
        }
        cases[n_cases++] = (struct test_case){name, file, fn, seconds};
}

void test_register(const char *name, test_fn fn, const char *file)
{
        test_register_slow(name, fn, file, 0);
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "  %s:%d: ", file, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        test_failed = true;
}

static bool test_skipped;

bool test_skip_unless_root(const char *why)
{
        if (geteuid() == 0)
                return false;
        fprintf(stderr, "  skipped: needs root: %s\n", why);
        test_skipped = true;
        return true;
}

static unsigned case_timeout(void)
{
        const char *v = getenv("LOCKBOX_UNIT_TIMEOUT");
        long t = v ? strtol(v, NULL, 10) : 0;
        return t > 0 && t < 3600 ? (unsigned)t : CASE_TIMEOUT_S;
}

/* The parent's own alarm only interrupts waitpid (no SA_RESTART). */
static void on_parent_alarm(int sig)
{
        (void)sig;
}

static _Noreturn void case_child(const struct test_case *tc, unsigned timeout)
{
        /* A group of its own, so helpers it forked die with it. */
        setpgid(0, 0);
        signal(SIGALRM, SIG_DFL);
        alarm(timeout);
        tc->fn();
        alarm(0);
#ifdef __SANITIZE_ADDRESS__
        /* _exit() skips LeakSanitizer's check at exit(): run it here. */
        if (__lsan_do_recoverable_leak_check())
                test_fail(tc->file, 0, "LeakSanitizer found leaks (above)");
#endif
        fflush(NULL);
        _exit(test_failed ? 1 : test_skipped ? CASE_SKIPPED : 0);
}

/* 0 when the case passed, 1 when it skipped itself, -1 when it failed. A
 * case still running past its time (it blocked or ignored SIGALRM) is
 * killed by the parent a second later. */
static int run_case(const struct test_case *tc, unsigned timeout)
{
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
                fprintf(stderr, "  fork: %s\n", strerror(errno));
                return -1;
        }
        if (pid == 0)
                case_child(tc, timeout);
        setpgid(pid, pid); /* also here: no race with the kill below */
        alarm(timeout + 1);
        int status = 0;
        bool killed = false;
        while (waitpid(pid, &status, 0) < 0) {
                if (errno != EINTR)
                        return -1;
                kill(-pid, SIGKILL);
                killed = true;
        }
        alarm(0);
        kill(-pid, SIGKILL); /* whatever the case left behind */
        if (killed || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM))
                fprintf(stderr, "  timed out after %u s (LOCKBOX_UNIT_TIMEOUT)\n", timeout);
        else if (WIFSIGNALED(status))
                fprintf(stderr, "  crashed with signal %d (%s)\n", WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
        if (killed || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status) == 0 ? 0 : WEXITSTATUS(status) == CASE_SKIPPED ? 1 : -1;
}

int main(int argc, char **argv)
{
        struct sigaction sa = {.sa_handler = on_parent_alarm};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, NULL);
        unsigned timeout = case_timeout();
        unsigned passed = 0, failed = 0, skipped = 0;
        for (size_t i = 0; i < n_cases; i++) {
                if (argc > 1 && !strstr(cases[i].name, argv[1]))
                        continue;
                int r =
                    run_case(&cases[i], cases[i].seconds > timeout ? cases[i].seconds : timeout);
                if (r == 0) {
                        passed++;
                } else if (r > 0) {
                        skipped++;
                        fprintf(stderr, "SKIP %s (%s)\n", cases[i].name, cases[i].file);
                } else {
                        failed++;
                        fprintf(stderr, "FAIL %s (%s)\n", cases[i].name, cases[i].file);
                }
        }
        if (skipped)
                printf("%u skipped: they need root (docs/TESTING.md); as root every case runs\n",
                       skipped);
        printf("%u passed, %u failed\n", passed, failed);
        free(cases);
        return failed ? 1 : 0;
}
