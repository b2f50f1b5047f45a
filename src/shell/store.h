/* The shell side's records (src/shell/store.c): one SQLite database,
 * shell.state_dir/shell.db (WAL), with a row per job and per binding, so
 * a lockboxd that starts again knows the jobs the last one left running
 * and can find their keepers (jobs.c). Written by the jailer alone. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct store;

struct store_job {
        const char *id;
        int mode;   /* enum shell_mode */
        int status; /* SHELL_* */
        bool has_exit;
        int exit_code;
        int64_t created, started, ended; /* Unix seconds, -1 unset */
        const char *home;                /* the job's HOME */
        unsigned binding;                /* its binding's serial */
        pid_t keeper;                    /* the keeper's PID (host), 0 once gone */
        const char *ws; /* its workspace, "" none, NULL not known (a row of version 1) */
};

struct store_binding {
        unsigned serial;
        const char *key;
        pid_t pid;            /* its init (host PID) */
        uint64_t start_ticks; /* the init's start time (/proc/PID/stat), with pid its identity */
};

/* Open (create) path; -errno or -EIO with the reason in err. */
int store_open(const char *path, struct store **ret, char *err, size_t errlen);
struct store *store_close(struct store *st);

/* Insert or replace a row; delete one. Failures are logged, not fatal:
 * the jobs go on, only a restart would lose them. */
void store_job_put(struct store *st, const struct store_job *j);
void store_job_delete(struct store *st, const char *id);
void store_binding_put(struct store *st, const struct store_binding *b);
void store_binding_delete(struct store *st, unsigned serial);

/* Every row replaced at once (in one transaction): after a start has
 * adopted what the last lockboxd left, its rows are put again between
 * store_rewrite_begin and store_rewrite_end. */
void store_rewrite_begin(struct store *st);
void store_rewrite_end(struct store *st);

/* Every row, bindings first; the strings are valid during the call. */
int store_load(struct store *st, void (*on_binding)(const struct store_binding *, void *),
               void (*on_job)(const struct store_job *, void *), void *data);
