/* SPDX-License-Identifier: MIT */
/* server/queue_sqlite.c - the queue's SQLite driver (WAL; see queue_db.h). */
#include "common/err.h"
#include "server/queue_db.h"

#include <assert.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Prepared statements are cached per connection, keyed by the address of their SQL literal:
 * preparing costs more than running most of these statements. Statements built at run time
 * (the ingest batches) are kept in the q__stmt_lru by their text. */
#define LITE_STMT_CACHE 64

/* The WAL's size once it restarts. SQLite writes a restarted WAL over the old file and keeps
 * its size; a reader that held an old snapshot through a burst (nothing can restart the WAL
 * under it) would leave a file of that burst's size for good. Under a steady load the WAL
 * stays at ~26 MB (server/ingest.c), well below this. */
#define LITE_WAL_LIMIT "67108864"

struct q__db {
	sqlite3 *db;
	char *path;
	struct {
		const char *sql;
		sqlite3_stmt *st;
	} cache[LITE_STMT_CACHE];
	int ncache;
	q__stmt_lru texts; /* stmt: a sqlite3_stmt */
};

/* One materialised value of a result row. */
struct lite_cell {
	int type; /* SQLITE_NULL, SQLITE_INTEGER, SQLITE_TEXT, SQLITE_BLOB ... */
	int64_t i;
	char *s; /* text or blob bytes (NUL-terminated) */
	size_t n;
};

struct q__res {
	int rows, cols, alloc;
	struct lite_cell *cells; /* rows * cols */
};

static int lite_fail(q__db *d, const char *what)
{
	int code = sqlite3_errcode(d->db);

	return ap_error_set(code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_BUSY ||
				    code == SQLITE_LOCKED
				? AP_EIO
				: AP_EINVAL,
			    "database %s: %s failed: %s", d->path, what, sqlite3_errmsg(d->db));
}

static void finalize(void *ud, void *st)
{
	(void)ud;
	sqlite3_finalize(st);
}

static void lite_close(q__db *d)
{
	if (!d)
		return;
	q__lru_clear(&d->texts, finalize, NULL);
	for (int i = 0; i < d->ncache; i++)
		sqlite3_finalize(d->cache[i].st);
	sqlite3_close_v2(d->db);
	free(d->path);
	free(d);
}

static int lite_open(q__db **out, const char *path, bool create)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
	q__db *d;
	int rc;

	*out = NULL;
	if (!create && access(path, F_OK) != 0)
		return ap_error_set(AP_ENOTFOUND, "no database at %s (set AUTOPATCH_DB)", path);
	d = calloc(1, sizeof(*d));
	if (!d || !(d->path = strdup(path))) {
		free(d);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	if (create)
		flags |= SQLITE_OPEN_CREATE;
	if (sqlite3_open_v2(path, &d->db, flags, NULL) != SQLITE_OK) {
		rc = ap_error_set(AP_EIO, "cannot open database %s: %s", path,
				  d->db ? sqlite3_errmsg(d->db) : "out of memory");
		goto fail;
	}
	if (sqlite3_db_readonly(d->db, "main") == 1) {
		rc = ap_error_set(AP_EIO, "database %s is read-only", path);
		goto fail;
	}
	sqlite3_busy_timeout(d->db, 10000);
	sqlite3_extended_result_codes(d->db, 0);
	/* WAL: readers never block the writer. synchronous=FULL: a COMMIT is on disk before the
	 * 2xx goes out (group commit pays one fsync per batch, not per delivery). */
	if (sqlite3_exec(d->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(d->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(d->db, "PRAGMA journal_size_limit=" LITE_WAL_LIMIT, NULL, NULL, NULL) !=
		SQLITE_OK) {
		rc =
		    ap_error_set(AP_EIO, "cannot use database %s: %s", path, sqlite3_errmsg(d->db));
		goto fail;
	}
	*out = d;
	return 0;
fail:
	lite_close(d);
	return rc;
}

static int prep(q__db *d, sqlite3_stmt **st, const char *sql)
{
	for (int i = 0; i < d->ncache; i++)
		if (d->cache[i].sql == sql) {
			*st = d->cache[i].st;
			sqlite3_reset(*st);
			sqlite3_clear_bindings(*st);
			return 0;
		}
	assert(d->ncache < LITE_STMT_CACHE);
	if (sqlite3_prepare_v3(d->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return lite_fail(d, "prepare");
	d->cache[d->ncache].sql = sql;
	d->cache[d->ncache].st = *st;
	d->ncache++;
	return 0;
}

static void lite_res_free(q__res *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->rows * r->cols; i++)
		free(r->cells[i].s);
	free(r->cells);
	free(r);
}

/* Append the current row of st to r. */
static int add_row(q__res *r, sqlite3_stmt *st)
{
	if ((r->rows + 1) * r->cols > r->alloc) {
		int n = r->alloc ? r->alloc * 2 : r->cols * 4;
		struct lite_cell *c = realloc(r->cells, (size_t)n * sizeof(*c));

		if (!c)
			return ap_error_set(AP_ENOMEM, "out of memory");
		r->cells = c;
		r->alloc = n;
	}
	for (int i = 0; i < r->cols; i++) {
		struct lite_cell *c = &r->cells[r->rows * r->cols + i];

		memset(c, 0, sizeof(*c));
		c->type = sqlite3_column_type(st, i);
		if (c->type == SQLITE_INTEGER || c->type == SQLITE_FLOAT) {
			c->i = sqlite3_column_int64(st, i);
		} else if (c->type != SQLITE_NULL) {
			const void *p = c->type == SQLITE_BLOB
					    ? sqlite3_column_blob(st, i)
					    : (const void *)sqlite3_column_text(st, i);

			c->n = (size_t)sqlite3_column_bytes(st, i);
			c->s = malloc(c->n + 1);
			if (!c->s) {
				for (int j = 0; j < i; j++)
					free(r->cells[r->rows * r->cols + j].s);
				return ap_error_set(AP_ENOMEM, "out of memory");
			}
			if (c->n)
				memcpy(c->s, p, c->n);
			c->s[c->n] = '\0';
		}
	}
	r->rows++;
	return 0;
}

/* Bind, run and collect st; finalize: st is not cached (freed here), else reset. */
static int run_stmt(q__db *d, sqlite3_stmt *st, bool finalize, const q__val *args, int nargs,
		    q__res **rows, int64_t *changes)
{
	q__res *r = NULL;
	int rc = 0, step;

	for (int i = 0; i < nargs; i++) {
		const q__val *v = &args[i];

		if (v->t == QV_ARRAY) {
			rc = ap_error_set(AP_EINVAL, "database %s: no array parameters in SQLite",
					  d->path);
			goto out;
		} else if (v->t == QV_INT) {
			sqlite3_bind_int64(st, i + 1, v->i);
		} else if (!v->s)
			sqlite3_bind_null(st, i + 1);
		else if (v->t == QV_TEXT)
			sqlite3_bind_text(st, i + 1, v->s, (int)q__text_len(v->s), SQLITE_STATIC);
		else if (v->n)
			sqlite3_bind_blob64(st, i + 1, v->s, v->n, SQLITE_STATIC);
		else
			sqlite3_bind_zeroblob(st, i + 1, 0);
	}
	if (rows) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out;
		}
		r->cols = sqlite3_column_count(st);
	}
	while ((step = sqlite3_step(st)) == SQLITE_ROW)
		if (r && r->cols && (rc = add_row(r, st)))
			goto out;
	if (step != SQLITE_DONE) {
		rc = lite_fail(d, "statement");
		goto out;
	}
	if (changes)
		*changes = sqlite3_changes64(d->db);
	if (rows) {
		*rows = r;
		r = NULL;
	}
out:
	if (finalize) {
		sqlite3_finalize(st);
	} else {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
	lite_res_free(r);
	return rc;
}

static int lite_exec(q__db *d, const char *sql, const q__val *args, int nargs, q__res **rows,
		     int64_t *changes)
{
	sqlite3_stmt *st;
	int rc;

	if (rows)
		*rows = NULL;
	if ((rc = prep(d, &st, sql)))
		return rc;
	return run_stmt(d, st, false, args, nargs, rows, changes);
}

static int lite_exec_once(q__db *d, const char *sql, const q__val *args, int nargs, q__res **rows,
			  int64_t *changes)
{
	sqlite3_stmt *st;
	bool kept = true;

	if (rows)
		*rows = NULL;
	if (!(st = q__lru_find(&d->texts, sql, NULL, 0))) {
		if (sqlite3_prepare_v3(d->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) !=
		    SQLITE_OK)
			return lite_fail(d, "prepare");
		/* Not kept (too long, out of memory): run once and finalize. */
		kept = q__lru_add(&d->texts, sql, NULL, 0, st, finalize, NULL) == 0;
	}
	return run_stmt(d, st, !kept, args, nargs, rows, changes);
}

static int lite_script(q__db *d, const char *sql)
{
	if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return lite_fail(d, "migration");
	return 0;
}

/* BEGIN IMMEDIATE takes SQLite's write lock: a second process migrating waits for it. */
static int lite_migrate_lock(q__db *d)
{
	return lite_script(d, "BEGIN IMMEDIATE");
}

static int lite_migrate_unlock(q__db *d, bool commit)
{
	if (commit)
		return lite_script(d, "COMMIT");
	sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
	return 0;
}

static int lite_autocheckpoint(q__db *d, int pages)
{
	return sqlite3_wal_autocheckpoint(d->db, pages) == SQLITE_OK
		   ? 0
		   : lite_fail(d, "autocheckpoint");
}

/* PASSIVE: never waits for, nor blocks, the writer. */
static int lite_checkpoint(q__db *d)
{
	int rc = sqlite3_wal_checkpoint_v2(d->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);

	return rc == SQLITE_OK || rc == SQLITE_BUSY ? 0 : lite_fail(d, "checkpoint");
}

static int lite_res_rows(const q__res *r)
{
	return r ? r->rows : 0;
}

static const struct lite_cell *cell(const q__res *r, int row, int col)
{
	assert(r && row < r->rows && col < r->cols);
	return &r->cells[row * r->cols + col];
}

static bool lite_res_null(const q__res *r, int row, int col)
{
	return cell(r, row, col)->type == SQLITE_NULL;
}

static int64_t lite_res_int(const q__res *r, int row, int col)
{
	const struct lite_cell *c = cell(r, row, col);

	return c->s ? strtoll(c->s, NULL, 10) : c->i;
}

static const char *lite_res_text(const q__res *r, int row, int col)
{
	return cell(r, row, col)->s;
}

static int lite_res_blob(const q__res *r, int row, int col, unsigned char **out, size_t *n)
{
	const struct lite_cell *c = cell(r, row, col);

	*out = NULL;
	*n = 0;
	if (!c->s)
		return 0;
	*out = malloc(c->n + 1);
	if (!*out)
		return ap_error_set(AP_ENOMEM, "out of memory");
	memcpy(*out, c->s, c->n + 1);
	*n = c->n;
	return 0;
}

static const char *const lite_migrations[] = {
    Q_SCHEMA_V1("INTEGER PRIMARY KEY", "INTEGER", "BLOB"),
    Q_SCHEMA_V2("INTEGER"),
    Q_SCHEMA_V3("INTEGER PRIMARY KEY", "INTEGER"),
};

const q__driver q__sqlite_driver = {
    .name = "sqlite",
    .shared = false,
    .begin_write = "BEGIN IMMEDIATE",
    .begin_read = "BEGIN",
    .day_lock = NULL,
    .migrations = lite_migrations,
    .nmigrations = (int)(sizeof(lite_migrations) / sizeof(lite_migrations[0])),
    .open = lite_open,
    .close = lite_close,
    .exec = lite_exec,
    .exec_once = lite_exec_once,
    .script = lite_script,
    .migrate_lock = lite_migrate_lock,
    .migrate_unlock = lite_migrate_unlock,
    .notify = NULL,
    .wait = NULL,
    .autocheckpoint = lite_autocheckpoint,
    .checkpoint = lite_checkpoint,
    .res_rows = lite_res_rows,
    .res_null = lite_res_null,
    .res_int = lite_res_int,
    .res_text = lite_res_text,
    .res_blob = lite_res_blob,
    .res_free = lite_res_free,
};
