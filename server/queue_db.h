/* SPDX-License-Identifier: MIT */
/* server/queue_db.h - the queue's storage drivers (internal to server/queue*.c).
 *
 * The queue's behaviour (server/queue.c) is written once, as SQL both backends accept, against
 * this small driver table: run one statement with typed parameters and get its rows back, run
 * a script, take the migration lock, wake pollers. server/queue_sqlite.c (the embedded
 * default) and server/queue_pg.c (libpq, for replicas sharing one database) implement it.
 *
 * SQL handed to q__db_exec numbers its parameters ?1, ?2 ... (the PostgreSQL driver turns
 * them into $1, $2 ...); a statement is a string literal, and drivers cache its prepared form
 * keyed by the literal's address. A driver handle is used by one thread at a time (queue.c
 * holds the queue's mutex around every call).
 */
#ifndef AP_QUEUE_DB_H
#define AP_QUEUE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Texts stored per job are capped so one runaway result cannot bloat the database. */
#define Q_TEXT_MAX (16 * 1024)

enum q__vtype { QV_INT, QV_TEXT, QV_BLOB, QV_ARRAY };

/* One parameter. Text and blob values are borrowed for the call; s == NULL binds NULL. An
 * array (drivers with .arrays only) borrows n elements a[], each of type et (QV_INT, QV_TEXT
 * or QV_BLOB; a NULL text or blob is a NULL element): the statement reads it with unnest(). */
typedef struct q__val {
	enum q__vtype t;
	int64_t i;
	const char *s;
	size_t n; /* blob length; array: element count */
	const struct q__val *a;
	enum q__vtype et;
} q__val;

#define QI(x)	       ((q__val){QV_INT, (int64_t)(x), NULL, 0, NULL, QV_INT})
#define QT(x)	       ((q__val){QV_TEXT, 0, (x), 0, NULL, QV_INT})
#define QB(p, len)     ((q__val){QV_BLOB, 0, (const char *)(p), (len), NULL, QV_INT})
#define QA(type, v, n) ((q__val){QV_ARRAY, 0, NULL, (n), (v), (type)})

typedef struct q__db q__db;   /* one connection (driver-private) */
typedef struct q__res q__res; /* the rows of one statement (driver-private) */

typedef struct q__driver {
	const char *name; /* "sqlite", "postgresql" */
	bool shared;	  /* several processes or hosts use the database at once */
	bool arrays;	  /* binds QV_ARRAY parameters (PostgreSQL's arrays, for unnest) */
	/* SQL fragments where the dialects differ (everything else is shared text). */
	const char *begin_write; /* a transaction that writes */
	const char *begin_read;	 /* a read-only snapshot */
	/* Run inside begin_write with the UTC day (?1, text) before a budget's sums: serialises
	 * every run's check-and-hold of that day. NULL when begin_write already does (SQLite's
	 * BEGIN IMMEDIATE holds the database's write lock). */
	const char *day_lock;
	/* Schema migrations: scripts[v-1] takes the schema to version v. */
	const char *const *migrations;
	int nmigrations;

	/* Connect to target (a path or a URI). create: make the database when missing (SQLite).
	 * Sets the error message (naming the target, never a password) on failure. */
	int (*open)(q__db **out, const char *target, bool create);
	void (*close)(q__db *db);
	/* Run one statement. rows (may be NULL) receives its rows, changes (may be NULL) how
	 * many rows it changed. AP_EUNAVAIL when the server is unreachable, AP_EIO for a
	 * failure worth retrying (busy, deadlock, I/O), AP_EINVAL for a bad statement. */
	int (*exec)(q__db *db, const char *sql, const q__val *args, int nargs, q__res **rows,
		    int64_t *changes);
	/* The same for a statement built at run time (not a literal): cached by its text in
	 * the driver's q__stmt_lru (the ingest batches: one text per batch size). */
	int (*exec_once)(q__db *db, const char *sql, const q__val *args, int nargs, q__res **rows,
			 int64_t *changes);
	/* Run a script of statements without parameters (migrations). */
	int (*script)(q__db *db, const char *sql);
	/* The cross-process migration lock: held from lock to unlock (SQLite: a write
	 * transaction, committed by unlock(commit = true); PostgreSQL: an advisory lock). */
	int (*migrate_lock)(q__db *db);
	int (*migrate_unlock)(q__db *db, bool commit);
	/* Wake other processes' pollers (NULL: nobody to wake). Never relied upon. */
	int (*notify)(q__db *db);
	/* Wait up to timeout_ms for a notification; *woken says whether one came. */
	int (*wait)(q__db *db, int timeout_ms, bool *woken);
	/* SQLite's WAL housekeeping (NULL: the server does its own). */
	int (*autocheckpoint)(q__db *db, int pages);
	int (*checkpoint)(q__db *db);

	int (*res_rows)(const q__res *r);
	bool (*res_null)(const q__res *r, int row, int col);
	int64_t (*res_int)(const q__res *r, int row, int col);
	/* Borrowed, valid until res_free; NULL for SQL NULL. */
	const char *(*res_text)(const q__res *r, int row, int col);
	/* A malloc'd copy of a blob column (caller frees), *n its length; NULL and 0 for NULL. */
	int (*res_blob)(const q__res *r, int row, int col, unsigned char **out, size_t *n);
	void (*res_free)(q__res *r);
} q__driver;

/* The schema, once for both backends: each driver's migrations[] expand these with its
 * types (PK: the id column's type, I64: a 64-bit integer, BLOB: raw bytes). Version 1 is
 * the schema of the releases before versioned migrations (IF NOT EXISTS, so such a database
 * takes it as a no-op); version 2 adds fencing epochs, compressed bodies and shared GitHub
 * write pacing; version 3 adds the spending ledger (docs/agents.md "Costs and budgets"). */
#define Q_SCHEMA_V1(PK, I64, BLOB)                                                                 \
	"CREATE TABLE IF NOT EXISTS deliveries("                                                   \
	" id " PK ","                                                                              \
	" delivery TEXT NOT NULL UNIQUE,"                                                          \
	" event TEXT NOT NULL,"                                                                    \
	" body " BLOB " NOT NULL,"                                                                 \
	" received " I64 " NOT NULL,"                                                              \
	" outcome TEXT NOT NULL);"                                                                 \
	"CREATE TABLE IF NOT EXISTS jobs("                                                         \
	" id " PK ","                                                                              \
	" delivery TEXT NOT NULL,"                                                                 \
	" event TEXT NOT NULL,"                                                                    \
	" repo TEXT NOT NULL,"                                                                     \
	" repo_id " I64 " NOT NULL DEFAULT 0,"                                                     \
	" installation_id " I64 " NOT NULL DEFAULT 0,"                                             \
	" issue " I64 " NOT NULL,"                                                                 \
	" trigger TEXT NOT NULL,"                                                                  \
	" feedback TEXT,"                                                                          \
	" trigger_comment_id " I64 " NOT NULL DEFAULT 0,"                                          \
	" state TEXT NOT NULL DEFAULT 'queued'"                                                    \
	"  CHECK(state IN ('queued','running','succeeded','failed','cancelled')),"                 \
	" stage TEXT,"                                                                             \
	" attempts INTEGER NOT NULL DEFAULT 0,"                                                    \
	" lease_owner TEXT,"                                                                       \
	" lease_until " I64 ","                                                                    \
	" not_before " I64 " NOT NULL DEFAULT 0,"                                                  \
	" created " I64 " NOT NULL,"                                                               \
	" updated " I64 " NOT NULL,"                                                               \
	" result TEXT,"                                                                            \
	" error TEXT,"                                                                             \
	" cancel_requested INTEGER NOT NULL DEFAULT 0);"                                           \
	"CREATE UNIQUE INDEX IF NOT EXISTS jobs_active ON jobs(repo, issue)"                       \
	" WHERE state IN ('queued','running');"                                                    \
	"CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(state, not_before, id);"                    \
	"CREATE TABLE IF NOT EXISTS job_events("                                                   \
	" id " PK ","                                                                              \
	" job " I64 " NOT NULL,"                                                                   \
	" time " I64 " NOT NULL,"                                                                  \
	" stage TEXT,"                                                                             \
	" message TEXT NOT NULL);"                                                                 \
	"CREATE INDEX IF NOT EXISTS job_events_job ON job_events(job, id);"                        \
	"CREATE TABLE IF NOT EXISTS job_state("                                                    \
	" job " I64 " NOT NULL,"                                                                   \
	" key TEXT NOT NULL,"                                                                      \
	" value TEXT NOT NULL,"                                                                    \
	" PRIMARY KEY(job, key));"
#define Q_SCHEMA_V2(I64)                                                                           \
	"ALTER TABLE jobs ADD COLUMN lease_epoch " I64 " NOT NULL DEFAULT 0;"                      \
	"ALTER TABLE deliveries ADD COLUMN body_encoding INTEGER NOT NULL DEFAULT 0;"              \
	"CREATE INDEX IF NOT EXISTS jobs_queued ON jobs(not_before, id) WHERE state='queued';"     \
	"CREATE TABLE IF NOT EXISTS gh_pacing("                                                    \
	" installation " I64 " PRIMARY KEY,"                                                       \
	" next_at " I64 " NOT NULL);"
/* The spending ledger: one row per run of a job, money in micro-dollars. A day carries spent
 * for closed rows and max(reserved, spent) for open ones, so a run whose process died keeps
 * its hold (fail closed). IF NOT EXISTS: a SQLite database of the costs release (which created
 * it before versioned migrations) takes it as a no-op. */
#define Q_SCHEMA_V3(PK, I64)                                                                       \
	"CREATE TABLE IF NOT EXISTS spend("                                                        \
	" id " PK ","                                                                              \
	" job " I64 " NOT NULL,"                                                                   \
	" repo TEXT NOT NULL,"                                                                     \
	" day TEXT NOT NULL," /* UTC YYYY-MM-DD of the run's start */                              \
	" reserved " I64 " NOT NULL,"                                                              \
	" spent " I64 " NOT NULL DEFAULT 0,"                                                       \
	" tokens_in " I64 " NOT NULL DEFAULT 0,"                                                   \
	" tokens_out " I64 " NOT NULL DEFAULT 0,"                                                  \
	" calls " I64 " NOT NULL DEFAULT 0,"                                                       \
	" priced INTEGER NOT NULL,"                                                                \
	" open INTEGER NOT NULL DEFAULT 1);"                                                       \
	"CREATE INDEX IF NOT EXISTS spend_day ON spend(day, repo);"                                \
	"CREATE INDEX IF NOT EXISTS spend_job ON spend(job);"

extern const q__driver q__sqlite_driver;
extern const q__driver q__pg_driver;

/* True when target selects the PostgreSQL driver (postgres:// or postgresql://). */
bool q__is_pg_uri(const char *target);

/* The length of s to store: at most Q_TEXT_MAX bytes, cut on a UTF-8 character boundary. */
size_t q__text_len(const char *s);

/* Prepared forms of statements built at run time, per connection, by text plus an extra key
 * (PostgreSQL: the parameter types), the least recently used one dropped when full. Both
 * drivers keep one; the statement handle is the driver's (a sqlite3_stmt, a statement name).
 * Zero-initialised is empty. */
#define Q_LRU_SIZE     64
#define Q_LRU_TEXT_MAX (64 * 1024) /* longer texts are not kept */
typedef void (*q__lru_drop_fn)(void *ud, void *stmt);
typedef struct q__stmt_lru {
	struct q__lru_entry {
		char *sql; /* NULL: free */
		void *key; /* a copy of the extra key */
		size_t key_len;
		uint64_t hash, used;
		void *stmt;
	} e[Q_LRU_SIZE];
	uint64_t tick;
} q__stmt_lru;

/* The cached statement for sql + key, or NULL. */
void *q__lru_find(q__stmt_lru *c, const char *sql, const void *key, size_t key_len);
/* Keep stmt for sql + key; when full, the least recently used entry goes to drop(ud, its
 * stmt) first. AP_ENOMEM (stmt not kept: the caller still owns it) or AP_EINVAL (sql too long
 * to keep) on failure. */
int q__lru_add(q__stmt_lru *c, const char *sql, const void *key, size_t key_len, void *stmt,
	       q__lru_drop_fn drop, void *ud);
/* Drop every entry (drop may be NULL: the handles are already gone with the connection). */
void q__lru_clear(q__stmt_lru *c, q__lru_drop_fn drop, void *ud);

#endif
