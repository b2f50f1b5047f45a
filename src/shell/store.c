/* See store.h. Debian's libsqlite3; statements prepared once. The
 * database is the jailer's own (root, 0600, in the 0700 state directory);
 * WAL with synchronous=NORMAL: a commit survives lockboxd's death, the
 * last ones may be lost with the machine's (whose restart makes every
 * running job lost anyway). */
#include "shell/store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/util.h"

enum {
        Q_JOB_PUT,
        Q_JOB_DEL,
        Q_BIND_PUT,
        Q_BIND_DEL,
        Q_JOBS,
        Q_BINDINGS,
        Q_MAX,
};

static const char *const queries[Q_MAX] = {
    [Q_JOB_PUT] = "INSERT OR REPLACE INTO jobs (id, mode, status, exit_code, created, started, "
                  "ended, home, binding, keeper, ws) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [Q_JOB_DEL] = "DELETE FROM jobs WHERE id = ?1",
    [Q_BIND_PUT] = "INSERT OR REPLACE INTO bindings (serial, key, pid, start_ticks) "
                   "VALUES (?1, ?2, ?3, ?4)",
    [Q_BIND_DEL] = "DELETE FROM bindings WHERE serial = ?1",
    [Q_JOBS] = "SELECT id, mode, status, exit_code, created, started, ended, home, binding, "
               "keeper, ws FROM jobs ORDER BY created, id",
    [Q_BINDINGS] = "SELECT serial, key, pid, start_ticks FROM bindings ORDER BY serial",
};

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS jobs ("
    " id TEXT PRIMARY KEY, mode INTEGER NOT NULL, status INTEGER NOT NULL,"
    " exit_code INTEGER, created INTEGER NOT NULL, started INTEGER NOT NULL,"
    " ended INTEGER NOT NULL, home TEXT NOT NULL, binding INTEGER NOT NULL,"
    " keeper INTEGER NOT NULL, ws TEXT);"
    "CREATE TABLE IF NOT EXISTS bindings ("
    " serial INTEGER PRIMARY KEY, key TEXT NOT NULL, pid INTEGER NOT NULL,"
    " start_ticks INTEGER NOT NULL);"
    "PRAGMA user_version=2;";

/* Version 1 had no ws column (a job's workspace): added, NULL in the rows
 * it left (not known). */
static int migrate(sqlite3 *db, char **msg)
{
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, "SELECT ws FROM jobs LIMIT 0", -1, &s, NULL) == SQLITE_OK) {
                sqlite3_finalize(s);
                return SQLITE_OK;
        }
        return sqlite3_exec(db, "ALTER TABLE jobs ADD COLUMN ws TEXT", NULL, NULL, msg);
}

struct store {
        sqlite3 *db;
        sqlite3_stmt *q[Q_MAX];
};

struct store *store_close(struct store *st)
{
        if (!st)
                return NULL;
        for (int i = 0; i < Q_MAX; i++)
                sqlite3_finalize(st->q[i]);
        sqlite3_close(st->db);
        free(st);
        return NULL;
}

int store_open(const char *path, struct store **ret, char *err, size_t errlen)
{
        struct store *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        mode_t old = umask(0077);
        int rc = sqlite3_open_v2(path, &st->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW |
                                     SQLITE_OPEN_FULLMUTEX,
                                 NULL);
        umask(old);
        char *msg = NULL;
        if (rc == SQLITE_OK)
                rc = sqlite3_busy_timeout(st->db, 5000);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(st->db, schema, NULL, NULL, &msg);
        if (rc == SQLITE_OK)
                rc = migrate(st->db, &msg);
        for (int i = 0; rc == SQLITE_OK && i < Q_MAX; i++)
                rc = sqlite3_prepare_v3(st->db, queries[i], -1, SQLITE_PREPARE_PERSISTENT,
                                        &st->q[i], NULL);
        if (rc != SQLITE_OK) {
                snprintf(err, errlen, "shell jobs: %s: %s", path,
                         msg      ? msg
                         : st->db ? sqlite3_errmsg(st->db)
                                  : sqlite3_errstr(rc));
                sqlite3_free(msg);
                store_close(st);
                return -EIO;
        }
        *ret = st;
        return 0;
}

static void step(struct store *st, int q, const char *what)
{
        sqlite3_stmt *s = st->q[q];
        int rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                log_error(NULL, "shell.store_failed", "what=%s error=%s", what,
                          log_q(sqlite3_errmsg(st->db)));
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
}

void store_job_put(struct store *st, const struct store_job *j)
{
        if (!st)
                return;
        sqlite3_stmt *s = st->q[Q_JOB_PUT];
        sqlite3_bind_text(s, 1, j->id, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, j->mode);
        sqlite3_bind_int(s, 3, j->status);
        if (j->has_exit)
                sqlite3_bind_int(s, 4, j->exit_code);
        else
                sqlite3_bind_null(s, 4);
        sqlite3_bind_int64(s, 5, j->created);
        sqlite3_bind_int64(s, 6, j->started);
        sqlite3_bind_int64(s, 7, j->ended);
        sqlite3_bind_text(s, 8, j->home, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 9, j->binding);
        sqlite3_bind_int64(s, 10, j->keeper);
        if (j->ws)
                sqlite3_bind_text(s, 11, j->ws, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(s, 11);
        step(st, Q_JOB_PUT, "job");
}

void store_job_delete(struct store *st, const char *id)
{
        if (!st)
                return;
        sqlite3_bind_text(st->q[Q_JOB_DEL], 1, id, -1, SQLITE_STATIC);
        step(st, Q_JOB_DEL, "job_delete");
}

void store_binding_put(struct store *st, const struct store_binding *b)
{
        if (!st)
                return;
        sqlite3_stmt *s = st->q[Q_BIND_PUT];
        sqlite3_bind_int64(s, 1, b->serial);
        sqlite3_bind_text(s, 2, b->key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, b->pid);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)b->start_ticks);
        step(st, Q_BIND_PUT, "binding");
}

void store_binding_delete(struct store *st, unsigned serial)
{
        if (!st)
                return;
        sqlite3_bind_int64(st->q[Q_BIND_DEL], 1, serial);
        step(st, Q_BIND_DEL, "binding_delete");
}

static void exec(struct store *st, const char *sql)
{
        char *msg = NULL;
        if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK)
                log_error(NULL, "shell.store_failed", "what=%s error=%s", log_q(sql),
                          log_q(msg ? msg : "?"));
        sqlite3_free(msg);
}

void store_rewrite_begin(struct store *st)
{
        exec(st, "BEGIN IMMEDIATE; DELETE FROM jobs; DELETE FROM bindings;");
}

void store_rewrite_end(struct store *st)
{
        exec(st, "COMMIT;");
}

static const char *text(sqlite3_stmt *s, int col)
{
        const unsigned char *t = sqlite3_column_text(s, col);
        return t ? (const char *)t : "";
}

int store_load(struct store *st, void (*on_binding)(const struct store_binding *, void *),
               void (*on_job)(const struct store_job *, void *), void *data)
{
        int rc;
        sqlite3_stmt *s = st->q[Q_BINDINGS];
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                struct store_binding b = {.serial = (unsigned)sqlite3_column_int64(s, 0),
                                          .key = text(s, 1),
                                          .pid = (pid_t)sqlite3_column_int64(s, 2),
                                          .start_ticks = (uint64_t)sqlite3_column_int64(s, 3)};
                on_binding(&b, data);
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return -EIO;
        s = st->q[Q_JOBS];
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                /* NULL: a row of version 1 (its workspace not known) */
                const char *ws = sqlite3_column_type(s, 10) == SQLITE_NULL ? NULL : text(s, 10);
                struct store_job j = {.id = text(s, 0),
                                      .mode = sqlite3_column_int(s, 1),
                                      .status = sqlite3_column_int(s, 2),
                                      .has_exit = sqlite3_column_type(s, 3) != SQLITE_NULL,
                                      .exit_code = sqlite3_column_int(s, 3),
                                      .created = sqlite3_column_int64(s, 4),
                                      .started = sqlite3_column_int64(s, 5),
                                      .ended = sqlite3_column_int64(s, 6),
                                      .home = text(s, 7),
                                      .binding = (unsigned)sqlite3_column_int64(s, 8),
                                      .keeper = (pid_t)sqlite3_column_int64(s, 9),
                                      .ws = ws};
                on_job(&j, data);
        }
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : -EIO;
}
