/* Unit-test runner: forks one process per registered case, reports each
 * failure with its messages, and prints "N passed, N failed" last. An
 * optional argument runs only the cases whose name contains it. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

struct test_case {
        const char *name;
        const char *file;
        test_fn fn;
};

static struct test_case cases[1024];
static size_t n_cases;
bool test_failed;

void test_register(const char *name, test_fn fn, const char *file)
{
        if (n_cases < sizeof(cases) / sizeof(cases[0]))
                cases[n_cases++] = (struct test_case){name, file, fn};
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

static int run_case(const struct test_case *tc)
{
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                tc->fn();
                fflush(NULL);
                _exit(test_failed ? 1 : 0);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                ;
        if (WIFSIGNALED(status))
                fprintf(stderr, "  crashed with signal %d\n", WTERMSIG(status));
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
        unsigned passed = 0, failed = 0;
        for (size_t i = 0; i < n_cases; i++) {
                if (argc > 1 && !strstr(cases[i].name, argv[1]))
                        continue;
                if (run_case(&cases[i]) == 0) {
                        passed++;
                } else {
                        failed++;
                        fprintf(stderr, "FAIL %s (%s)\n", cases[i].name, cases[i].file);
                }
        }
        printf("%u passed, %u failed\n", passed, failed);
        return failed ? 1 : 0;
}
