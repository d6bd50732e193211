/* SPDX-License-Identifier: MIT */
/* server/queue.c - the job queue's behaviour, once for both backends (see queue.h and
 * docs/internals/queue.md): every statement here is SQL that SQLite and PostgreSQL both
 * accept, run through the driver table of queue_db.h. */
#include "server/queue.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/money.h"
#include "common/stats.h"
#include "server/queue_db.h"
#include "server/queue_internal.h"
#include "server/webhook.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

/* A batch whose transaction failed for a passing reason (deadlock, serialization, a dropped
 * connection) is tried this often in all. */
#define Q_INGEST_TRIES 3

/* A batch of up to this many deliveries is stored whole, larger ones in power-of-two
 * chunks: 3 statements for each of 8 + 6 sizes fit the statement cache (Q_LRU_SIZE). */
#define Q_BATCH_WHOLE 8

static const char *stage_names[] = {"preparing", "planning", "building", "testing", "publishing"};

const char *q_stage_name(enum job_stage stage)
{
	if ((unsigned)stage < sizeof(stage_names) / sizeof(stage_names[0]))
		return stage_names[stage];
	return "unknown";
}

int64_t q_backoff_ms(int64_t base_ms, int attempts)
{
	int64_t d = base_ms;

	assert(base_ms >= 0 && attempts >= 0);
	for (int i = 1; i < attempts && d < 3600000; i++)
		d *= 2;
	return d > 3600000 ? 3600000 : d;
}

size_t q__text_len(const char *s)
{
	return ap_utf8_cut(s, Q_TEXT_MAX);
}

/* FNV-1a over the text, then the extra key. */
static uint64_t lru_hash(const char *sql, const void *key, size_t key_len)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (const unsigned char *p = (const unsigned char *)sql; *p; p++)
		h = (h ^ *p) * UINT64_C(1099511628211);
	for (size_t i = 0; i < key_len; i++)
		h = (h ^ ((const unsigned char *)key)[i]) * UINT64_C(1099511628211);
	return h;
}

static void lru_forget(struct q__lru_entry *e)
{
	free(e->sql);
	free(e->key);
	memset(e, 0, sizeof(*e));
}

void *q__lru_find(q__stmt_lru *c, const char *sql, const void *key, size_t key_len)
{
	uint64_t h = lru_hash(sql, key, key_len);

	for (int i = 0; i < Q_LRU_SIZE; i++) {
		struct q__lru_entry *e = &c->e[i];

		if (e->sql && e->hash == h && e->key_len == key_len && strcmp(e->sql, sql) == 0 &&
		    (key_len == 0 || memcmp(e->key, key, key_len) == 0)) {
			e->used = ++c->tick;
			return e->stmt;
		}
	}
	return NULL;
}

int q__lru_add(q__stmt_lru *c, const char *sql, const void *key, size_t key_len, void *stmt,
	       q__lru_drop_fn drop, void *ud)
{
	struct q__lru_entry *slot = &c->e[0];
	size_t len = strlen(sql);

	assert(stmt);
	if (len > Q_LRU_TEXT_MAX)
		return AP_EINVAL;
	for (int i = 0; i < Q_LRU_SIZE; i++) {
		if (!c->e[i].sql) {
			slot = &c->e[i];
			break;
		}
		if (c->e[i].used < slot->used)
			slot = &c->e[i];
	}
	if (slot->sql) {
		if (drop)
			drop(ud, slot->stmt);
		lru_forget(slot);
	}
	slot->sql = malloc(len + 1);
	slot->key = key_len ? malloc(key_len) : NULL;
	if (!slot->sql || (key_len && !slot->key)) {
		lru_forget(slot);
		return AP_ENOMEM;
	}
	memcpy(slot->sql, sql, len + 1);
	if (key_len)
		memcpy(slot->key, key, key_len);
	slot->key_len = key_len;
	slot->hash = lru_hash(sql, key, key_len);
	slot->used = ++c->tick;
	slot->stmt = stmt;
	return 0;
}

void q__lru_clear(q__stmt_lru *c, q__lru_drop_fn drop, void *ud)
{
	for (int i = 0; i < Q_LRU_SIZE; i++)
		if (c->e[i].sql) {
			if (drop)
				drop(ud, c->e[i].stmt);
			lru_forget(&c->e[i]);
		}
	c->tick = 0;
}

/* One statement; rows and changes may be NULL. */
int q__x(queue *q, const char *sql, const q__val *args, int nargs, q__res **rows, int64_t *changes)
{
	return q->drv->exec(q->db, sql, args, nargs, rows, changes);
}

/* A statement without parameters or rows (BEGIN, COMMIT, SAVEPOINT ...). */
int q__int(queue *q, const char *sql, const q__val *args, int nargs, int64_t *out)
{
	q__res *r = NULL;
	int rc;

	*out = 0;
	rc = q__x(q, sql, args, nargs, &r, NULL);
	if (rc == 0 && q->drv->res_rows(r) > 0 && !q->drv->res_null(r, 0, 0))
		*out = q->drv->res_int(r, 0, 0);
	q->drv->res_free(r);
	return rc;
}

int q__sx(queue *q, const char *sql)
{
	return q->drv->exec(q->db, sql, NULL, 0, NULL, NULL);
}

/* Roll back the open transaction, keeping the message of the failure that caused it. */
void q__rollback(queue *q)
{
	char saved[AP_ERROR_MSG_MAX];

	snprintf(saved, sizeof(saved), "%s", ap_error_last());
	q__sx(q, "ROLLBACK");
	ap_error_set(AP_EIO, "%s", saved);
}

static char *dup_text(queue *q, const q__res *r, int row, int col)
{
	const char *s = q->drv->res_text(r, row, col);

	return s ? strdup(s) : NULL;
}

/* --- open and migrate -------------------------------------------------------------------- */

bool q_shared(const queue *q)
{
	return q->drv->shared;
}

const char *q_backend(const queue *q)
{
	return q->drv->name;
}

static int read_version(queue *q, int *out)
{
	int64_t v;
	int rc = q__int(q, "SELECT max(version) FROM schema_migrations", NULL, 0, &v);

	*out = (int)v;
	return rc;
}

int q_schema_version(queue *q, int *out)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = read_version(q, out);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* Apply the migrations this database lacks, under the cross-process lock. */
static int migrate(queue *q, const char *target)
{
	int have = 0, want = q->drv->nmigrations, rc;

	if (read_version(q, &have) == 0 && have == want)
		return 0;
	ap_error_clear();
	if ((rc = q->drv->migrate_lock(q->db)))
		return rc;
	if ((rc = q->drv->script(q->db, "CREATE TABLE IF NOT EXISTS schema_migrations("
					" version INTEGER PRIMARY KEY,"
					" applied BIGINT NOT NULL)")) ||
	    (rc = read_version(q, &have)))
		goto out_unlock;
	if (have > want) {
		rc = ap_error_set(AP_EINVAL,
				  "database %s has schema version %d, newer than this autopatch "
				  "(%d): upgrade autopatch",
				  target, have, want);
		goto out_unlock;
	}
	for (int v = have + 1; v <= want; v++)
		if ((rc = q->drv->script(q->db, q->drv->migrations[v - 1])) ||
		    (rc = q__x(q, "INSERT INTO schema_migrations(version, applied) VALUES(?1, ?2)",
			       ARGS(QI(v), QI(ap_wall_ms())), NULL, NULL)))
			goto out_unlock;
	return q->drv->migrate_unlock(q->db, true);
out_unlock:
	q->drv->migrate_unlock(q->db, false);
	return rc;
}

void q_close(queue *q)
{
	if (!q)
		return;
	if (q->db)
		q->drv->close(q->db);
	for (int i = 0; i < Q_ZCTX; i++) {
		ZSTD_freeCCtx(q->zc[i]);
		pthread_mutex_destroy(&q->zlock[i]);
	}
	pthread_mutex_destroy(&q->lock);
	free(q);
}

int q_open(queue **out, const char *target, enum q_open_mode mode)
{
	queue *q;
	int rc;

	*out = NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_init(&q->lock, NULL);
	for (int i = 0; i < Q_ZCTX; i++)
		pthread_mutex_init(&q->zlock[i], NULL);
	q->drv = q__is_pg_uri(target) ? &q__pg_driver : &q__sqlite_driver;
	if ((rc = q->drv->open(&q->db, target, mode == Q_OPEN_CREATE)))
		goto fail;
	if ((rc = migrate(q, target))) {
		char why[AP_ERROR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", ap_error_last());
		rc = ap_error_set(rc == AP_EUNAVAIL ? AP_EUNAVAIL : AP_EIO,
				  "cannot migrate database: %s", why);
		goto fail;
	}
	*out = q;
	return 0;
fail:
	q_close(q);
	return rc;
}

int q_autocheckpoint(queue *q, int pages)
{
	int rc = 0;

	if (!q->drv->autocheckpoint)
		return 0;
	pthread_mutex_lock(&q->lock);
	rc = q->drv->autocheckpoint(q->db, pages);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_checkpoint(queue *q)
{
	int rc = 0;

	if (!q->drv->checkpoint)
		return 0;
	pthread_mutex_lock(&q->lock);
	rc = q->drv->checkpoint(q->db);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- intake ---------------------------------------------------------------------------- */

static int add_event(queue *q, int64_t job, const char *stage, const char *msg, int64_t now)
{
	return q__x(q, "INSERT INTO job_events(job, time, stage, message) VALUES(?1, ?2, ?3, ?4)",
		    ARGS(QI(job), QI(now), QT(stage), QT(msg ? msg : "")), NULL, NULL);
}

static int find_active(queue *q, const char *repo, int64_t issue, int64_t *id)
{
	return q__int(q,
		      "SELECT id FROM jobs WHERE repo=?1 AND issue=?2 AND "
		      "state IN ('queued','running') LIMIT 1",
		      ARGS(QT(repo), QI(issue)), id);
}

/* The UPDATE of each branch names the state it saw, so a job another replica leased or
 * cancelled in between is looked at again instead of overwritten. */
static int cancel_locked(queue *q, const char *repo, int64_t issue, const char *why, int64_t now,
			 int *count)
{
	int rc;

	if (count)
		*count = 0;
	for (int tries = 0; tries < 5; tries++) {
		q__res *r = NULL;
		int64_t id, changed = 0;
		bool running, has_comment;
		const char *sql;

		rc = q__x(q,
			  "SELECT id, CASE WHEN state='running' THEN 1 ELSE 0 END, "
			  "CASE WHEN EXISTS(SELECT 1 FROM job_state s WHERE s.job=jobs.id AND "
			  "s.key='comment_id') THEN 1 ELSE 0 END FROM jobs WHERE repo=?1 AND "
			  "issue=?2 AND state IN ('queued','running')",
			  ARGS(QT(repo), QI(issue)), &r, NULL);
		if (rc || q->drv->res_rows(r) == 0) {
			q->drv->res_free(r);
			return rc;
		}
		id = q->drv->res_int(r, 0, 0);
		running = q->drv->res_int(r, 0, 1) != 0;
		has_comment = q->drv->res_int(r, 0, 2) != 0;
		q->drv->res_free(r);
		if (running)
			sql = "UPDATE jobs SET cancel_requested=1, updated=?1 WHERE id=?2 AND "
			      "state='running'";
		else if (has_comment)
			/* A job waiting for a retry already told the issue "autopatch will
			 * retry": it is leased at once so the pipeline edits that comment to say
			 * cancelled (a worker sees cancel_requested before running it). */
			sql = "UPDATE jobs SET cancel_requested=1, not_before=0, updated=?1 "
			      "WHERE id=?2 AND state='queued'";
		else
			sql = "UPDATE jobs SET state='cancelled', cancel_requested=1, "
			      "error='cancelled', lease_owner=NULL, lease_until=NULL, updated=?1 "
			      "WHERE id=?2 AND state='queued'";
		if ((rc = q__x(q, sql, ARGS(QI(now), QI(id)), NULL, &changed)))
			return rc;
		if (changed == 0)
			continue;
		if ((rc = add_event(q, id, NULL, why, now)))
			return rc;
		if (count)
			*count = 1;
		return 0;
	}
	return ap_error_set(AP_EIO, "job of %s#%lld kept changing while being cancelled", repo,
			    (long long)issue);
}

/* Apply one delivery inside the open transaction. The raw body (compressed when that is
 * smaller: zbody) is kept for deliveries that do something (a new job reads its payload from
 * it; a cancel is worth auditing); ignored deliveries and triggers for an already active job
 * keep only their metadata, so the noise a busy installation sends does not grow the
 * database by a payload each. The job insert itself enforces one active job per issue (the
 * partial unique index), so two replicas racing on one issue store one job. */
static int ingest_one(queue *q, q_delivery *d, const unsigned char *zbody, size_t zlen, int64_t now)
{
	bool keep_body = d->kind == Q_CANCEL || d->kind == Q_TRIGGER;
	const char *outcome;
	q__val body = QB("", 0);
	int64_t enc = BODY_RAW, changed = 0, active = 0;
	q__res *r = NULL;
	int rc;

	if (d->kind == Q_RECORD)
		outcome = d->note ? d->note : "ignored";
	else if (d->kind == Q_CANCEL)
		outcome = "cancel";
	else
		outcome = "queued";
	if (keep_body && zbody) {
		body = QB(zbody, zlen);
		enc = BODY_ZSTD;
	} else if (keep_body && d->len) {
		body = QB(d->body, d->len);
	}
	if ((rc = q__x(q,
		       "INSERT INTO deliveries(delivery, event, body, body_encoding, received, "
		       "outcome) VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(delivery) DO NOTHING",
		       ARGS(QT(d->delivery), QT(d->event), body, QI(enc), QI(now), QT(outcome)),
		       NULL, &changed)))
		return rc;
	if (changed == 0) {
		d->result = Q_DUPLICATE;
		return 0;
	}
	if (d->kind == Q_RECORD) {
		d->result = Q_RECORDED;
		return 0;
	}
	if (d->kind == Q_CANCEL) {
		char why[160];

		/* Fits: a delivery id is at most WH_DELIVERY_MAX (100) bytes, checked at intake. */
		snprintf(why, sizeof(why), "cancel requested by delivery %.100s", d->delivery);
		if ((rc = cancel_locked(q, d->repo, d->issue, why, now, &d->ncancelled)))
			return rc;
		d->result = Q_CANCELLED;
		return 0;
	}
	if ((rc = q__x(q,
		       "INSERT INTO jobs(delivery, event, repo, repo_id, installation_id, issue, "
		       "trigger, feedback, trigger_comment_id, created, updated) "
		       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) "
		       "ON CONFLICT(repo, issue) WHERE state IN ('queued','running') DO NOTHING "
		       "RETURNING id",
		       ARGS(QT(d->delivery), QT(d->event), QT(d->repo), QI(d->repo_id),
			    QI(d->installation_id), QI(d->issue), QT(wh_trigger_name(d->trigger)),
			    QT(d->feedback), QI(d->comment_id), QI(now)),
		       &r, NULL)))
		return rc;
	if (q->drv->res_rows(r) > 0) {
		d->job_id = q->drv->res_int(r, 0, 0);
		q->drv->res_free(r);
		d->result = Q_QUEUED;
		if (d->title && (rc = q__x(q,
					   "INSERT INTO job_state(job, key, value) VALUES(?1, "
					   "'title', ?2)",
					   ARGS(QI(d->job_id), QT(d->title)), NULL, NULL)))
			return rc;
		return add_event(q, d->job_id, NULL, "queued", now);
	}
	q->drv->res_free(r);
	if ((rc = find_active(q, d->repo, d->issue, &active)) ||
	    (rc = q__x(q,
		       "UPDATE deliveries SET outcome='active job', body=?1, body_encoding=0 "
		       "WHERE delivery=?2",
		       ARGS(QB("", 0), QT(d->delivery)), NULL, NULL)))
		return rc;
	d->result = Q_ACTIVE;
	d->job_id = active;
	return 0;
}

struct ing_ctx {
	q_delivery *d;
	unsigned char *z;
	size_t zlen;
	size_t seq; /* place in the batch as submitted */
};

static bool ctx_acts(const struct ing_ctx *c)
{
	return c->d->kind != Q_RECORD && c->d->repo;
}

/* The order in which a batch takes its row locks on a shared database, the same in every
 * replica: recorded deliveries by delivery id, then what acts on an issue by (repo, issue)
 * — the jobs' rows — and, on one issue, in the order the deliveries arrived (a cancel must
 * not be applied before the trigger it follows). Two replicas' batches then wait for each
 * other instead of deadlocking, except over two deliveries of one issue that each received
 * in the other order (PostgreSQL detects that; the batch is tried again). */
static int lock_order(const void *a, const void *b)
{
	const struct ing_ctx *x1 = a, *x2 = b;
	bool act1 = ctx_acts(x1), act2 = ctx_acts(x2);
	int c;

	if (act1 != act2)
		return act1 ? 1 : -1;
	if (!act1)
		return strcmp(x1->d->delivery ? x1->d->delivery : "",
			      x2->d->delivery ? x2->d->delivery : "");
	if ((c = strcmp(x1->d->repo, x2->d->repo)))
		return c;
	if (x1->d->issue != x2->d->issue)
		return x1->d->issue < x2->d->issue ? -1 : 1;
	return x1->seq < x2->seq ? -1 : x1->seq > x2->seq;
}

/* "(?, ?, ... ?), (...) ..." for rows rows of k bare parameters each: bound in order, and
 * SQLite numbers them without the look-up a "?N" costs it per parameter (quadratic in a
 * statement of thousands of them). */
static int add_values(ap_buf *b, size_t rows, int k)
{
	int rc = 0;

	for (size_t r = 0; rc == 0 && r < rows; r++) {
		rc = ap_buf_adds(b, r ? ",(?" : "(?");
		for (int i = 1; rc == 0 && i < k; i++)
			rc = ap_buf_adds(b, ",?");
		if (rc == 0)
			rc = ap_buf_adds(b, ")");
	}
	return rc;
}

/* A statement built at run time, with its parameters; rows may be NULL. */
static int xd(queue *q, ap_buf *sql, const q__val *args, int nargs, q__res **rows)
{
	if (!sql->data)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return q->drv->exec_once(q->db, sql->data, args, nargs, rows, NULL);
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* The first delivery of the batch with id that is still Q_DUPLICATE was stored new: a trigger
 * becomes Q_FAILED (its job comes next), a record Q_RECORDED. Returns 1 for a new trigger. */
static size_t mark_new(struct ing_ctx *c, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (c[i].d->result == Q_DUPLICATE && same(c[i].d->delivery, id)) {
			c[i].d->result = c[i].d->kind == Q_TRIGGER ? Q_FAILED : Q_RECORDED;
			return c[i].d->kind == Q_TRIGGER;
		}
	return 0;
}

/* The new trigger with delivery id stored job job_id: Q_QUEUED. */
static void mark_queued(struct ing_ctx *c, size_t n, const char *id, int64_t job_id)
{
	assert(job_id > 0); /* a queued delivery names its job */
	for (size_t i = 0; i < n; i++)
		if (c[i].d->result == Q_FAILED && same(c[i].d->delivery, id)) {
			c[i].d->result = Q_QUEUED;
			c[i].d->job_id = job_id;
			return;
		}
}

/* Step 1 of batch_store_rows: the deliveries; *nnew = how many were new (not duplicates).
 * sql is empty on entry, v has room for 6 values a delivery. */
static int batch_store_deliveries(queue *q, struct ing_ctx *c, size_t n, int64_t now, ap_buf *sql,
				  q__val *v, size_t *nnew)
{
	q__res *r = NULL;
	int rc, k = 0;

	ap_buf_adds(sql, "INSERT INTO deliveries(delivery, event, body, body_encoding, received, "
			 "outcome) VALUES ");
	if ((rc = add_values(sql, n, 6)))
		return rc;
	ap_buf_adds(sql, " ON CONFLICT(delivery) DO NOTHING RETURNING delivery");
	for (size_t i = 0; i < n; i++) {
		q_delivery *d = c[i].d;
		bool trig = d->kind == Q_TRIGGER;

		v[k++] = QT(d->delivery);
		v[k++] = QT(d->event);
		v[k++] = trig && c[i].z	  ? QB(c[i].z, c[i].zlen)
			 : trig && d->len ? QB(d->body, d->len)
					  : QB("", 0);
		v[k++] = QI(trig && c[i].z ? BODY_ZSTD : BODY_RAW);
		v[k++] = QI(now);
		v[k++] = QT(trig ? "queued" : d->note ? d->note : "ignored");
		d->result = Q_DUPLICATE;
	}
	if ((rc = xd(q, sql, v, k, &r))) {
		q->drv->res_free(r);
		return rc;
	}
	for (int row = 0; row < q->drv->res_rows(r); row++)
		*nnew += mark_new(c, n, q->drv->res_text(r, row, 0));
	q->drv->res_free(r);
	return 0;
}

/* Step 2: the jobs of the new triggers (still Q_FAILED here); v has room for 11 a delivery. */
static int batch_store_jobs(queue *q, struct ing_ctx *c, size_t n, int64_t now, ap_buf *sql,
			    q__val *v)
{
	q__res *r = NULL;
	int rc, k = 0;

	ap_buf_reset(sql);
	ap_buf_adds(sql, "INSERT INTO jobs(delivery, event, repo, repo_id, installation_id, "
			 "issue, trigger, feedback, trigger_comment_id, created, updated) VALUES ");
	for (size_t i = 0; i < n; i++) {
		q_delivery *d = c[i].d;

		if (d->result != Q_FAILED)
			continue;
		if ((k && (rc = ap_buf_adds(sql, ","))) || (rc = add_values(sql, 1, 11)))
			return rc;
		v[k++] = QT(d->delivery);
		v[k++] = QT(d->event);
		v[k++] = QT(d->repo);
		v[k++] = QI(d->repo_id);
		v[k++] = QI(d->installation_id);
		v[k++] = QI(d->issue);
		v[k++] = QT(wh_trigger_name(d->trigger));
		v[k++] = QT(d->feedback);
		v[k++] = QI(d->comment_id);
		v[k++] = QI(now);
		v[k++] = QI(now);
	}
	ap_buf_adds(sql, " ON CONFLICT(repo, issue) WHERE state IN ('queued','running') DO "
			 "NOTHING RETURNING id, delivery");
	if ((rc = xd(q, sql, v, k, &r))) {
		q->drv->res_free(r);
		return rc;
	}
	for (int row = 0; row < q->drv->res_rows(r); row++)
		mark_queued(c, n, q->drv->res_text(r, row, 1), q->drv->res_int(r, row, 0));
	q->drv->res_free(r);
	return 0;
}

/* Step 3: the new jobs' first event. */
static int batch_store_events(queue *q, struct ing_ctx *c, size_t n, int64_t now, ap_buf *sql,
			      q__val *v)
{
	int k = 0;

	ap_buf_reset(sql);
	ap_buf_adds(sql, "INSERT INTO job_events(job, time, stage, message) VALUES ");
	for (size_t i = 0; i < n; i++)
		if (c[i].d->result == Q_QUEUED) {
			ap_buf_adds(sql, k ? ",(?,?,NULL,'queued')" : "(?,?,NULL,'queued')");
			v[k++] = QI(c[i].d->job_id);
			v[k++] = QI(now);
		}
	return k ? xd(q, sql, v, k, NULL) : 0;
}

/* The batch of record and trigger deliveries in a few multi-row statements instead of a few
 * per delivery (a round trip each on PostgreSQL): the same rules as ingest_one. The
 * deliveries go in first (ON CONFLICT: duplicates, within the batch too), then the jobs of the
 * new triggers (ON CONFLICT on the active-job index: a second trigger for an issue, in the
 * batch or already in the database, stores no job) and their "queued" events. New triggers
 * that stored no job are left Q_FAILED for batch_settle_active. */
static int batch_store_rows(queue *q, struct ing_ctx *c, size_t n, int64_t now)
{
	ap_buf sql = AP_BUF_INIT(4 * 1024 * 1024);
	q__val *v = calloc(n * 11 + 1, sizeof(*v));
	size_t nnew = 0;
	int rc;

	if (!v)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (!(rc = batch_store_deliveries(q, c, n, now, &sql, v, &nnew)) && nnew > 0 &&
	    !(rc = batch_store_jobs(q, c, n, now, &sql, v)))
		rc = batch_store_events(q, c, n, now, &sql, v);
	ap_buf_release(&sql);
	free(v);
	return rc;
}

/* The columns batch_store_arrays binds, one array each, in this order. */
enum {
	BA_DELIVERY,
	BA_EVENT,
	BA_BODY,
	BA_ENC,
	BA_OUTCOME,
	BA_TRIG,
	BA_REPO,
	BA_REPO_ID,
	BA_INST,
	BA_ISSUE,
	BA_TRIGGER,
	BA_FEEDBACK,
	BA_COMMENT,
	BA_NCOLS
};

/* What batch_store_rows does, in one statement of fixed text (prepared once, whatever the
 * batch's size) on a driver that binds arrays: a round trip per batch instead of three per
 * chunk. The rows are inserted in the batch's order (WITH ORDINALITY, ORDER BY ord), so the
 * lock order and "the first of two wins" hold as there. A delivery id twice in the batch
 * stores one delivery (ON CONFLICT) and, through DISTINCT ON, at most the first one's job.
 * Answers the new deliveries (job id NULL), then the new jobs. */
static int batch_store_arrays(queue *q, struct ing_ctx *c, size_t n, int64_t now)
{
	static const enum q__vtype type[BA_NCOLS] = {
	    [BA_DELIVERY] = QV_TEXT, [BA_EVENT] = QV_TEXT,   [BA_BODY] = QV_BLOB,
	    [BA_ENC] = QV_INT,	     [BA_OUTCOME] = QV_TEXT, [BA_TRIG] = QV_INT,
	    [BA_REPO] = QV_TEXT,     [BA_REPO_ID] = QV_INT,  [BA_INST] = QV_INT,
	    [BA_ISSUE] = QV_INT,     [BA_TRIGGER] = QV_TEXT, [BA_FEEDBACK] = QV_TEXT,
	    [BA_COMMENT] = QV_INT};
	q__val *e = calloc(n * BA_NCOLS + 1, sizeof(*e)), args[BA_NCOLS + 1];
	q__res *r = NULL;
	int rc;

	if (!e)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (int col = 0; col < BA_NCOLS; col++)
		args[col] = QA(type[col], e + (size_t)col * n, n);
	args[BA_NCOLS] = QI(now);
	for (size_t i = 0; i < n; i++) {
		q_delivery *d = c[i].d;
		bool trig = d->kind == Q_TRIGGER;

		e[BA_DELIVERY * n + i] = QT(d->delivery);
		e[BA_EVENT * n + i] = QT(d->event);
		e[BA_BODY * n + i] = trig && c[i].z   ? QB(c[i].z, c[i].zlen)
				     : trig && d->len ? QB(d->body, d->len)
						      : QB("", 0);
		e[BA_ENC * n + i] = QI(trig && c[i].z ? BODY_ZSTD : BODY_RAW);
		e[BA_OUTCOME * n + i] = QT(trig ? "queued" : d->note ? d->note : "ignored");
		e[BA_TRIG * n + i] = QI(trig);
		e[BA_REPO * n + i] = QT(d->repo);
		e[BA_REPO_ID * n + i] = QI(d->repo_id);
		e[BA_INST * n + i] = QI(d->installation_id);
		e[BA_ISSUE * n + i] = QI(d->issue);
		e[BA_TRIGGER * n + i] = QT(trig ? wh_trigger_name(d->trigger) : NULL);
		e[BA_FEEDBACK * n + i] = QT(d->feedback);
		e[BA_COMMENT * n + i] = QI(d->comment_id);
		d->result = Q_DUPLICATE;
	}
	if ((rc = q__x(
		 q,
		 "WITH v AS (SELECT * FROM unnest(?1::text[], ?2::text[], ?3::bytea[], "
		 "?4::int8[], ?5::text[], ?6::int8[], ?7::text[], ?8::int8[], ?9::int8[], "
		 "?10::int8[], ?11::text[], ?12::text[], ?13::int8[]) WITH ORDINALITY AS "
		 "v(delivery, event, body, enc, outcome, trig, repo, repo_id, inst, issue, trg, "
		 "feedback, comment_id, ord)), "
		 "d AS (INSERT INTO deliveries(delivery, event, body, body_encoding, received, "
		 "outcome) SELECT delivery, event, body, enc, ?14, outcome FROM v ORDER BY ord "
		 "ON CONFLICT(delivery) DO NOTHING RETURNING delivery), "
		 "j AS (INSERT INTO jobs(delivery, event, repo, repo_id, installation_id, issue, "
		 "trigger, feedback, trigger_comment_id, created, updated) SELECT f.delivery, "
		 "f.event, f.repo, f.repo_id, f.inst, f.issue, f.trg, f.feedback, f.comment_id, "
		 "?14, ?14 FROM (SELECT DISTINCT ON (delivery) * FROM v ORDER BY delivery, ord) f "
		 "JOIN d ON d.delivery = f.delivery WHERE f.trig = 1 ORDER BY f.ord "
		 "ON CONFLICT(repo, issue) WHERE state IN ('queued','running') DO NOTHING "
		 "RETURNING id, delivery), "
		 "e AS (INSERT INTO job_events(job, time, stage, message) "
		 "SELECT id, ?14, NULL, 'queued' FROM j) "
		 "SELECT delivery, NULL FROM d UNION ALL SELECT delivery, id FROM j",
		 args, BA_NCOLS + 1, &r, NULL)))
		goto out;
	/* Every new delivery before any new job: a job marks a delivery found new. */
	for (int row = 0; row < q->drv->res_rows(r); row++)
		if (q->drv->res_null(r, row, 1))
			mark_new(c, n, q->drv->res_text(r, row, 0));
	for (int row = 0; row < q->drv->res_rows(r); row++)
		if (!q->drv->res_null(r, row, 1))
			mark_queued(c, n, q->drv->res_text(r, row, 0), q->drv->res_int(r, row, 1));
out:
	q->drv->res_free(r);
	free(e);
	return rc;
}

/* The new triggers that found an active job (Q_FAILED after batch_store_*): no body, and the
 * job they found; Q_ACTIVE. */
static int batch_settle_active(queue *q, struct ing_ctx *c, size_t n)
{
	ap_buf sql = AP_BUF_INIT(4 * 1024 * 1024);
	size_t nact = 0;
	q__val *v;
	q__res *r = NULL;
	int rc = 0, k = 0;

	for (size_t i = 0; i < n; i++)
		nact += c[i].d->result == Q_FAILED;
	if (!nact)
		return 0;
	if (!(v = calloc(nact * 2 + 1, sizeof(*v))))
		return ap_error_set(AP_ENOMEM, "out of memory");
	ap_buf_adds(&sql, "SELECT repo, issue, id FROM jobs WHERE state IN "
			  "('queued','running') AND (repo, issue) IN (VALUES ");
	if ((rc = add_values(&sql, nact, 2)))
		goto out;
	ap_buf_adds(&sql, ")");
	for (size_t i = 0; i < n; i++)
		if (c[i].d->result == Q_FAILED) {
			v[k++] = QT(c[i].d->repo);
			v[k++] = QI(c[i].d->issue);
		}
	if ((rc = xd(q, &sql, v, k, &r)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		q_delivery *d = c[i].d;

		if (d->result != Q_FAILED)
			continue;
		for (int row = 0; row < q->drv->res_rows(r); row++)
			if (same(q->drv->res_text(r, row, 0), d->repo) &&
			    q->drv->res_int(r, row, 1) == d->issue)
				d->job_id = q->drv->res_int(r, row, 2);
	}
	ap_buf_reset(&sql);
	ap_buf_adds(&sql, "UPDATE deliveries SET outcome='active job', body=?, "
			  "body_encoding=0 WHERE delivery IN (");
	k = 0;
	v[k++] = QB("", 0);
	for (size_t i = 0; i < n; i++)
		if (c[i].d->result == Q_FAILED) {
			ap_buf_adds(&sql, k > 1 ? ",?" : "?");
			v[k++] = QT(c[i].d->delivery);
			c[i].d->result = Q_ACTIVE;
		}
	ap_buf_adds(&sql, ")");
	rc = xd(q, &sql, v, k, NULL);
out:
	q->drv->res_free(r);
	ap_buf_release(&sql);
	free(v);
	return rc;
}

/* The titles of the batch's new jobs, in one statement (none when no new job has one). */
static int batch_store_titles(queue *q, struct ing_ctx *c, size_t n)
{
	ap_buf sql = AP_BUF_INIT(1024 * 1024);
	q__val *v = calloc(n * 2 + 1, sizeof(*v));
	int rc = 0, k = 0;

	if (!v)
		return ap_error_set(AP_ENOMEM, "out of memory");
	ap_buf_adds(&sql, "INSERT INTO job_state(job, key, value) VALUES ");
	for (size_t i = 0; i < n; i++)
		if (c[i].d->result == Q_QUEUED && c[i].d->title) {
			ap_buf_adds(&sql, k ? ",(?,'title',?)" : "(?,'title',?)");
			v[k++] = QI(c[i].d->job_id);
			v[k++] = QT(c[i].d->title);
		}
	if (k)
		rc = xd(q, &sql, v, k, NULL);
	ap_buf_release(&sql);
	free(v);
	return rc;
}

static int ingest_batch(queue *q, struct ing_ctx *c, size_t n, int64_t now)
{
	int rc = q->drv->arrays ? batch_store_arrays(q, c, n, now) : batch_store_rows(q, c, n, now);

	if (rc == 0)
		rc = batch_store_titles(q, c, n);
	return rc ? rc : batch_settle_active(q, c, n);
}

/* One try at the whole batch. isolate: each item under its own savepoint, so a failing item
 * fails alone (the first try goes without: one round trip less per statement pair). *item_failed
 * says that an item failed while not isolated (the batch is then rolled back). */
static int ingest_try(queue *q, struct ing_ctx *c, size_t n, int64_t now, bool isolate,
		      bool *item_failed)
{
	int rc;

	*item_failed = false;
	if ((rc = q__sx(q, q->drv->begin_write)))
		return rc;
	/* Without cancels the order of the items does not matter: a few statements for all. */
	for (size_t i = 0; !isolate && i < n && c[i].d->kind != Q_CANCEL; i++)
		if (i == n - 1) {
			for (size_t j = 0; j < n; j++) {
				c[j].d->job_id = 0;
				c[j].d->ncancelled = 0;
			}
			/* Up to Q_BATCH_WHOLE items at once, more in chunks of power-of-two sizes,
			 * largest first: the statements' texts then repeat (at most sixteen sizes
			 * up to the writer's 512), so each is prepared once and found again in the
			 * driver's q__stmt_lru; and a small batch, as at a modest rate, costs one
			 * round trip per statement. A driver that binds arrays takes the whole
			 * batch in one statement of fixed text (batch_store_arrays). */
			for (size_t off = 0, k; off < n; off += k) {
				for (k = 1; k * 2 <= n - off;)
					k *= 2;
				if (n - off <= Q_BATCH_WHOLE || q->drv->arrays)
					k = n - off;
				if ((rc = ingest_batch(q, c + off, k, now))) {
					*item_failed = true;
					goto out_rollback;
				}
			}
			goto out_commit;
		}
	for (size_t i = 0; i < n; i++) {
		q_delivery *d = c[i].d;

		d->result = Q_FAILED;
		d->job_id = 0;
		d->ncancelled = 0;
		if (isolate && (rc = q__sx(q, "SAVEPOINT item")))
			goto out_rollback;
		if ((rc = ingest_one(q, d, c[i].z, c[i].zlen, now))) {
			d->result = Q_FAILED;
			if (!isolate) {
				*item_failed = true;
				goto out_rollback;
			}
			if ((rc = q__sx(q, "ROLLBACK TO item")))
				goto out_rollback;
		}
		if (isolate && (rc = q__sx(q, "RELEASE item")))
			goto out_rollback;
	}
out_commit:
	if (q->precommit)
		q->precommit(q->precommit_ud);
	if ((rc = q__sx(q, "COMMIT")))
		goto out_rollback;
	return 0;
out_rollback:
	q__rollback(q);
	return rc;
}

int q_ingest(queue *q, q_delivery **items, size_t n, int64_t now)
{
	struct ing_ctx *c = calloc(n ? n : 1, sizeof(*c));
	bool isolate = false, item_failed = false;
	int rc = AP_ENOMEM;

	if (!c) {
		for (size_t i = 0; i < n; i++)
			items[i]->result = Q_FAILED;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	/* Compress outside the lock, unless the submitter did already; the batch takes the
	 * stored form. */
	for (size_t i = 0; i < n; i++) {
		q_encode_body(q, items[i]);
		c[i] = (struct ing_ctx){items[i], items[i]->stored, items[i]->stored_len, i};
		items[i]->stored = NULL;
		items[i]->encoded = false;
	}
	if (q->drv->shared)
		qsort(c, n, sizeof(*c), lock_order);
	pthread_mutex_lock(&q->lock);
	for (int tries = 0; tries < Q_INGEST_TRIES; tries++) {
		rc = ingest_try(q, c, n, now, isolate, &item_failed);
		if (rc == 0)
			break;
		if (item_failed && !isolate) {
			/* Not silent: the whole-batch statements are the fast path, and a fault in
			 * them would otherwise only show as a slower intake. */
			ap_log(AP_LOG_WARN, NULL, 0,
			       "ingest batch of %zu failed (%s); storing it one delivery at a time",
			       n, ap_error_last());
			ap_stat_add(AP_STAT_INGEST_ISOLATED, 1);
			isolate = true;
		} else if (rc != AP_EIO && rc != AP_EUNAVAIL)
			break;
	}
	if (rc == 0) {
		ap_error_clear();
	} else {
		for (size_t i = 0; i < n; i++)
			items[i]->result = Q_FAILED;
	}
	pthread_mutex_unlock(&q->lock);
	for (size_t i = 0; i < n; i++)
		free(c[i].z);
	free(c);
	return rc;
}

void q_set_precommit(queue *q, q_precommit_fn fn, void *ud)
{
	pthread_mutex_lock(&q->lock);
	q->precommit = fn;
	q->precommit_ud = ud;
	pthread_mutex_unlock(&q->lock);
}

/* --- workers --------------------------------------------------------------------------- */

void q_job_free(job_info *job)
{
	if (!job)
		return;
	free((char *)job->delivery);
	free((char *)job->event);
	free((char *)job->repo);
	free((char *)job->feedback);
	free((char *)job->payload);
	free(job);
}

/* The oldest ready job, taken in one statement; PostgreSQL skips rows another replica is
 * taking at this moment. */
#define LEASE_SQL(row_lock)                                                                        \
	"UPDATE jobs SET state='running', attempts=attempts+1, lease_epoch=lease_epoch+1, "        \
	"lease_owner=?1, lease_until=?2, stage='preparing', updated=?3 WHERE id=(SELECT id FROM "  \
	"jobs WHERE state='queued' AND not_before<=?3 ORDER BY not_before, id LIMIT 1" row_lock    \
	") RETURNING id, attempts, lease_epoch"
static const char lease_sql[] = LEASE_SQL("");
static const char lease_sql_skip_locked[] = LEASE_SQL(" FOR UPDATE SKIP LOCKED");

static int read_job(queue *q, int64_t id, job_info *job)
{
	unsigned char *body = NULL;
	size_t blen = 0;
	q__res *r = NULL;
	int rc, t;

	if ((rc = q__x(q,
		       "SELECT j.delivery, j.event, j.repo, j.repo_id, j.installation_id, j.issue, "
		       "j.trigger, j.feedback, j.trigger_comment_id, d.body, d.body_encoding "
		       "FROM jobs j LEFT JOIN deliveries d ON d.delivery=j.delivery WHERE j.id=?1",
		       ARGS(QI(id)), &r, NULL)))
		return rc;
	if (q->drv->res_rows(r) != 1) {
		q->drv->res_free(r);
		return ap_error_set(AP_EIO, "leased job %lld vanished", (long long)id);
	}
	job->delivery = dup_text(q, r, 0, 0);
	job->event = dup_text(q, r, 0, 1);
	job->repo = dup_text(q, r, 0, 2);
	job->repo_id = q->drv->res_int(r, 0, 3);
	job->installation_id = q->drv->res_int(r, 0, 4);
	job->issue = q->drv->res_int(r, 0, 5);
	t = wh_trigger_parse(q->drv->res_text(r, 0, 6));
	job->trigger = t < 0 ? JOB_TRIGGER_LABEL : (enum job_trigger)t;
	job->feedback = dup_text(q, r, 0, 7);
	job->trigger_comment_id = q->drv->res_int(r, 0, 8);
	if (!job->delivery || !job->event || !job->repo ||
	    (!q->drv->res_null(r, 0, 7) && !job->feedback))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	else if ((rc = q->drv->res_blob(r, 0, 9, &body, &blen)) == 0)
		rc = q__inflate_body(body, blen,
				     q->drv->res_null(r, 0, 10) ? 0 : q->drv->res_int(r, 0, 10),
				     (char **)&job->payload);
	if (rc == 0 && !job->payload && !(job->payload = strdup("")))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	q->drv->res_free(r);
	return rc;
}

int q_lease(queue *q, const char *owner, int64_t lease_ms, int64_t now, job_info **out)
{
	const char *sql = q->drv->shared ? lease_sql_skip_locked : lease_sql;
	job_info *job = NULL;
	q__res *r = NULL;
	char msg[160];
	int rc;

	assert(owner && owner[0] && lease_ms > 0);
	*out = NULL;
	job = calloc(1, sizeof(*job));
	if (!job)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out_unlock;
	if ((rc = q__x(q, sql, ARGS(QT(owner), QI(now + lease_ms), QI(now)), &r, NULL)))
		goto out_rollback;
	if (q->drv->res_rows(r) == 0) {
		rc = AP_ENOTFOUND;
		goto out_rollback;
	}
	assert(q->drv->res_rows(r) == 1); /* one id: the sub-select's LIMIT 1 */
	job->id = q->drv->res_int(r, 0, 0);
	job->attempts = (int)q->drv->res_int(r, 0, 1);
	job->epoch = q->drv->res_int(r, 0, 2);
	if ((rc = read_job(q, job->id, job)))
		goto out_rollback;
	/* Only shown (an event line); the lease itself keeps the whole owner. */
	snprintf(msg, sizeof(msg), "leased by %.100s (attempt %d)", owner, job->attempts);
	if ((rc = add_event(q, job->id, "preparing", msg, now)) || (rc = q__sx(q, "COMMIT")))
		goto out_rollback;
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	*out = job;
	return 0;
out_rollback:
	q__rollback(q);
out_unlock:
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	q_job_free(job);
	return rc;
}

int q__heartbeat(queue *q, int64_t id, const char *owner, int64_t lease_ms, int64_t now)
{
	int64_t changed = 0;
	int rc;

	q__assert_lease(id, owner);
	assert(lease_ms > 0);
	pthread_mutex_lock(&q->lock);
	rc = q__x(q,
		  "UPDATE jobs SET lease_until=?1 WHERE id=?2 AND lease_owner=?3 AND "
		  "state='running'",
		  ARGS(QI(now + lease_ms), QI(id), QT(owner)), NULL, &changed);
	q__assert_by_id(changed);
	if (rc == 0 && changed == 0)
		rc = ap_error_set(AP_ENOTFOUND, "job %lld: lease lost", (long long)id);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_fence(queue *q, const q_lease_ref *l, int64_t lease_ms, const char *stage, const char *msg,
	    int64_t now)
{
	int64_t changed = 0;
	int rc;

	q__assert_lease(l->id, l->owner);
	assert(l->epoch > 0 && lease_ms > 0); /* a lease's epoch starts at 1 (q_lease) */
	pthread_mutex_lock(&q->lock);
	if (msg && (rc = q__sx(q, q->drv->begin_write)))
		goto out;
	rc = q__x(
	    q,
	    "UPDATE jobs SET lease_until=?1, stage=COALESCE(?5, stage), "
	    "updated=CASE WHEN ?5 IS NULL THEN updated ELSE ?6 END WHERE id=?2 AND "
	    "lease_owner=?3 AND lease_epoch=?4 AND state='running' AND lease_until>=?6",
	    ARGS(QI(now + lease_ms), QI(l->id), QT(l->owner), QI(l->epoch), QT(stage), QI(now)),
	    NULL, &changed);
	q__assert_by_id(changed);
	if (rc == 0 && changed == 0)
		rc = ap_error_set(AP_ESTALE,
				  "job %lld: lease epoch %lld is no longer current (the job was "
				  "rescued or leased again)",
				  (long long)l->id, (long long)l->epoch);
	if (msg) {
		if (rc == 0 && (rc = add_event(q, l->id, stage, msg, now)) == 0)
			rc = q__sx(q, "COMMIT");
		if (rc)
			q__rollback(q);
	}
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* Run an UPDATE of a job this worker leases, then record msg and COMMIT, in the transaction
 * the caller opened. AP_ENOTFOUND when the UPDATE matched nothing (the lease was lost); the
 * caller rolls back on any error. */
static int commit_leased_update(queue *q, const char *sql, const q__val *args, int nargs,
				int64_t id, const char *msg, int64_t now)
{
	int64_t changed = 0;
	int rc;

	if ((rc = q__x(q, sql, args, nargs, NULL, &changed)))
		return rc;
	q__assert_by_id(changed);
	if (changed == 0)
		return ap_error_set(AP_ENOTFOUND, "job %lld: lease lost", (long long)id);
	if ((rc = add_event(q, id, NULL, msg, now)))
		return rc;
	return q__sx(q, "COMMIT");
}

int q_finish(queue *q, int64_t id, const char *owner, const char *state, const char *text,
	     int64_t now)
{
	bool ok = strcmp(state, "succeeded") == 0;
	char msg[200];
	int rc;

	/* running -> a terminal state, and nothing else: q_release re-queues. */
	assert(ok || strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0);
	q__assert_lease(id, owner);
	/* Only shown (an event line); the job keeps the whole text as its result or error. */
	snprintf(msg, sizeof(msg), "%s: %.180s", state, text ? text : "");
	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	if ((rc = commit_leased_update(
		 q,
		 "UPDATE jobs SET state=?1, result=?2, error=?3, lease_owner=NULL, "
		 "lease_until=NULL, updated=?4 WHERE id=?5 AND lease_owner=?6 AND "
		 "state='running'",
		 ARGS(QT(state), QT(ok ? text : NULL), QT(ok ? NULL : text), QI(now), QI(id),
		      QT(owner)),
		 id, msg, now)))
		q__rollback(q);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_release(queue *q, int64_t id, const char *owner, int64_t not_before, const char *error,
	      bool refund, int64_t now)
{
	char msg[200];
	int rc;

	q__assert_lease(id, owner);
	assert(not_before >= 0);
	/* Only shown (an event line); the job keeps the whole error. */
	snprintf(msg, sizeof(msg), "re-queued%s: %.160s", refund ? " (shutdown)" : "",
		 error ? error : "");
	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	rc = commit_leased_update(
	    q,
	    "UPDATE jobs SET state='queued', lease_owner=NULL, "
	    "lease_until=NULL, not_before=?1, error=?2, "
	    "attempts=CASE WHEN attempts>?3 THEN attempts-?3 ELSE 0 END, "
	    "updated=?4 WHERE id=?5 AND lease_owner=?6 AND state='running'",
	    ARGS(QI(not_before), QT(error), QI(refund ? 1 : 0), QI(now), QI(id), QT(owner)), id,
	    msg, now);
	if (rc)
		q__rollback(q);
	else if (q->drv->notify && not_before <= now)
		q->drv->notify(q->db);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_requeue_expired(queue *q, int max_attempts, int64_t now, int *count)
{
	q__res *r = NULL;
	int rc, n = 0;

	assert(max_attempts >= 1); /* checked when the pool starts (workers.c) */
	if (count)
		*count = 0;
	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	if ((rc = q__x(q,
		       "SELECT id, attempts, cancel_requested FROM jobs "
		       "WHERE state='running' AND lease_until<?1",
		       ARGS(QI(now)), &r, NULL)))
		goto out_rollback;
	for (int i = 0; i < q->drv->res_rows(r); i++) {
		int64_t id = q->drv->res_int(r, i, 0), changed = 0;
		int attempts = (int)q->drv->res_int(r, i, 1);
		const char *state, *msg;

		if (q->drv->res_int(r, i, 2)) {
			state = "cancelled";
			msg = "lease expired after a cancel request";
		} else if (attempts >= max_attempts) {
			state = "failed";
			msg = "lease expired (worker died) and no attempts are left";
		} else {
			state = "queued";
			msg = "lease expired (worker died): re-queued";
		}
		/* Still expired: another replica may have rescued (and re-leased) it. */
		if ((rc =
			 q__x(q,
			      "UPDATE jobs SET state=?1, lease_owner=NULL, lease_until=NULL, "
			      "not_before=?2, error=?3, updated=?2 WHERE id=?4 AND state='running' "
			      "AND lease_until<?2",
			      ARGS(QT(state), QI(now), QT(msg), QI(id)), NULL, &changed)))
			goto out_rollback;
		q__assert_by_id(changed);
		if (changed == 0)
			continue;
		if ((rc = add_event(q, id, NULL, msg, now)))
			goto out_rollback;
		n++;
	}
	if ((rc = q__sx(q, "COMMIT")))
		goto out_rollback;
	assert(n >= 0 && n <= q->drv->res_rows(r));
	if (n && q->drv->notify)
		q->drv->notify(q->db);
	if (count)
		*count = n;
	goto out;
out_rollback:
	q__rollback(q);
out:
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- cancellation, events, state ------------------------------------------------------- */

int q_cancel(queue *q, const char *repo, int64_t issue, const char *why, int64_t now, int *count)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	if ((rc = cancel_locked(q, repo, issue, why, now, count)) || (rc = q__sx(q, "COMMIT")))
		q__rollback(q);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_cancel_requested(queue *q, int64_t id, bool *yes)
{
	q__res *r = NULL;
	int rc;

	*yes = false;
	pthread_mutex_lock(&q->lock);
	rc = q__x(q, "SELECT cancel_requested FROM jobs WHERE id=?1", ARGS(QI(id)), &r, NULL);
	if (rc == 0 && q->drv->res_rows(r) == 0)
		rc = ap_error_set(AP_ENOTFOUND, "no job %lld", (long long)id);
	else if (rc == 0)
		*yes = q->drv->res_int(r, 0, 0) != 0;
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q__event(queue *q, int64_t id, const char *stage, const char *msg, int64_t now)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	if (stage && (rc = q__x(q, "UPDATE jobs SET stage=?1, updated=?2 WHERE id=?3",
				ARGS(QT(stage), QI(now), QI(id)), NULL, NULL)))
		goto out_rollback;
	if ((rc = add_event(q, id, stage, msg, now)) || (rc = q__sx(q, "COMMIT")))
		goto out_rollback;
	goto out;
out_rollback:
	q__rollback(q);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_state_set(queue *q, int64_t id, const char *key, const char *value)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = q__x(q,
		  "INSERT INTO job_state(job, key, value) VALUES(?1, ?2, ?3) "
		  "ON CONFLICT(job, key) DO UPDATE SET value=excluded.value",
		  ARGS(QI(id), QT(key), QT(value ? value : "")), NULL, NULL);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_state_get(queue *q, int64_t id, const char *key, char **value)
{
	q__res *r = NULL;
	int rc;

	*value = NULL;
	pthread_mutex_lock(&q->lock);
	rc = q__x(q, "SELECT value FROM job_state WHERE job=?1 AND key=?2", ARGS(QI(id), QT(key)),
		  &r, NULL);
	if (rc == 0 && q->drv->res_rows(r) > 0 && !(*value = dup_text(q, r, 0, 0)))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- coordination between replicas ---------------------------------------------------- */

int q_pace(queue *q, int64_t installation, int64_t spacing_ms, int64_t now, int64_t *wait_ms)
{
	q__res *r = NULL;
	int rc;

	assert(spacing_ms >= 0);
	*wait_ms = 0;
	pthread_mutex_lock(&q->lock);
	rc = q__x(q,
		  "INSERT INTO gh_pacing(installation, next_at) VALUES(?1, ?2 + ?3) "
		  "ON CONFLICT(installation) DO UPDATE SET next_at = CASE WHEN "
		  "gh_pacing.next_at > ?2 THEN gh_pacing.next_at ELSE ?2 END + ?3 "
		  "RETURNING next_at",
		  ARGS(QI(installation), QI(now), QI(spacing_ms)), &r, NULL);
	if (rc == 0 && q->drv->res_rows(r) > 0) {
		int64_t slot = q->drv->res_int(r, 0, 0) - spacing_ms;

		*wait_ms = slot > now ? slot - now : 0;
	}
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_notify(queue *q)
{
	int rc = 0;

	if (!q->drv->notify)
		return 0;
	pthread_mutex_lock(&q->lock);
	rc = q->drv->notify(q->db);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_wait_wake(queue *q, int timeout_ms, bool *woken)
{
	int rc;

	*woken = false;
	if (!q->drv->wait) {
		struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};

		nanosleep(&ts, NULL);
		return 0;
	}
	pthread_mutex_lock(&q->lock);
	rc = q->drv->wait(q->db, timeout_ms, woken);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* The issue's active job is checked first (the partial unique index would refuse the UPDATE
 * anyway, with a constraint error each backend words differently). */
int q_retry(queue *q, int64_t id, const char *why, int64_t now)
{
	q__res *r = NULL;
	int64_t changed = 0;
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	if ((rc = q__x(q,
		       "SELECT 1 FROM jobs a, jobs j WHERE j.id=?1 AND a.repo=j.repo AND "
		       "a.issue=j.issue AND a.id<>j.id AND a.state IN ('queued','running')",
		       ARGS(QI(id)), &r, NULL)))
		goto out_rollback;
	if (q->drv->res_rows(r) > 0) {
		rc = ap_error_set(AP_EDUPLICATE, "job %lld's issue already has an active job",
				  (long long)id);
		goto out_rollback;
	}
	if ((rc = q__x(q,
		       "UPDATE jobs SET state='queued', attempts=0, not_before=?1, result=NULL, "
		       "error=NULL, cancel_requested=0, lease_owner=NULL, lease_until=NULL, "
		       "updated=?1 WHERE id=?2 AND state IN ('failed','cancelled')",
		       ARGS(QI(now), QI(id)), NULL, &changed)))
		goto out_rollback;
	q__assert_by_id(changed);
	if (changed == 0) {
		rc = ap_error_set(AP_EINVAL, "job %lld is not failed or cancelled", (long long)id);
		goto out_rollback;
	}
	if ((rc = add_event(q, id, NULL, why ? why : "retried", now)) || (rc = q__sx(q, "COMMIT")))
		goto out_rollback;
	if (q->drv->notify)
		q->drv->notify(q->db);
	goto out;
out_rollback:
	q__rollback(q);
out:
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}
