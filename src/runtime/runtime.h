/* Language runtimes: how to start an interpreter inside the jail so that it
 * reads the program from fd 3 only after every lock is on. One ops table
 * per language; the jailer asks the table for the interpreter, argv and the
 * host paths the run must see read-only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;

struct runtime {
        const char *name; /* "python3" */
        uint32_t lang;    /* enum proto_language */
        char *exec_path;  /* as configured: the jail opens it inside its root */
        char **argv;      /* NULL-terminated */
        char **ro_paths;  /* host paths bound read-only, system + runtime + extra */
        size_t n_ro_paths;
        const char *const *lang_allow; /* syscalls this runtime adds, NULL-ended */
        bool spawn_kills;              /* a new process stops the run instead of failing */
        bool exit_report;              /* writes its exit code to fd 5, then may be killed */
};

/* The Python bootstrap, shared by the cold command line and the zygote. */
extern const char runtime_python_boot[];

int runtime_python_new(const struct config *cfg, struct runtime **ret, char *err, size_t errlen);
int runtime_node_new(const struct config *cfg, struct runtime **ret, char *err, size_t errlen);
struct runtime *runtime_free(struct runtime *rt);

/* The constructor behind each language's: argv is exec_path then args. */
int runtime_new_common(const char *name, uint32_t lang, const char *exec_path,
                       const char *const *args, size_t n_args, const char *const *lang_allow,
                       const struct config *cfg, struct runtime **ret, char *err, size_t errlen);

/* Shared by every runtime (runtime.c): the system paths plus the
 * configuration's jail.extra_ro_paths plus the interpreter's own prefix
 * when it lives outside them. */
int runtime_ro_paths(const struct config *cfg, const char *exec_path, struct runtime *rt, char *err,
                     size_t errlen);
/* Environment of a run: PATH, LANG, HOME, TMPDIR and, with network and a
 * configured proxy, the proxy variables (at most RUN_ENV_MAX entries).
 * NULL-terminated, malloc'd. */
#define RUN_ENV_MAX 8
char **runtime_env(const struct config *cfg, int network);
void runtime_strv_free(char **v);
