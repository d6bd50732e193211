/* SPDX-License-Identifier: MIT */
/* server/queue.h - the durable job queue: SQLite (WAL, one host) or PostgreSQL (replicas).
 *
 * Tables: deliveries (one row per verified delivery, UNIQUE delivery id, raw body stored
 * compressed, outcome), jobs (one row per unit of work, see job.h), job_events (the history
 * every view is built from), job_state (per-job key/value that survives re-runs) and
 * gh_pacing (when an installation may next be written to, for replicas). Schema, migrations
 * and state machine are described in docs/internals/queue.md.
 *
 * The target (AUTOPATCH_DB) selects the backend: a postgresql:// or postgres:// URI is a
 * PostgreSQL server that any number of `autopatch serve` processes share; anything else is
 * the path of a SQLite file. Every function behaves the same on both.
 *
 * A queue handle is one database connection guarded by a mutex: any thread may use it, but
 * the server gives each busy thread (the ingest writer, each worker, the lease keeper, the
 * HTTP reader) its own handle so they never wait on each other's mutex. Times are
 * milliseconds since the epoch and passed in by the caller, so tests control the clock.
 */
#ifndef AP_QUEUE_H
#define AP_QUEUE_H

#include "job/job.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct queue queue;

enum q_open_mode {
	Q_OPEN_CREATE,	 /* create the file and schema when missing (the server) */
	Q_OPEN_EXISTING, /* AP_ENOTFOUND when the file does not exist (the jobs command) */
};

/* Open (and migrate) the database at target (a SQLite path or a PostgreSQL URI). The
 * versioned migrations run under a lock (SQLite's write lock, a PostgreSQL advisory lock), so
 * replicas starting together are fine; a schema newer than this build is refused. Fails with
 * a sentence naming the target (never its password) when it cannot be created, reached,
 * opened for writing or migrated (AP_EUNAVAIL: the server is unreachable). *out is freed
 * with q_close(). */
int q_open(queue **out, const char *target, enum q_open_mode mode);
/* Accepts NULL. */
void q_close(queue *q);

/* True when the database is shared by several processes (PostgreSQL). */
bool q_shared(const queue *q);
/* "sqlite" or "postgresql". */
const char *q_backend(const queue *q);
/* The schema version the database is at (the number of migrations applied). */
int q_schema_version(queue *q, int *out);

/* WAL housekeeping. By default SQLite checkpoints on the connection whose COMMIT pushes the WAL
 * past 1000 pages, stalling that commit; the ingest writer turns that off (pages = 0) and a
 * separate connection checkpoints in the background with q_checkpoint (PASSIVE: never waits
 * for, nor blocks, the writer). After each background checkpoint the writer checkpoints the
 * few frames it committed meanwhile on its own connection, between batches, so the WAL can
 * restart from its beginning (server/ingest.c). No-ops on PostgreSQL. */
int q_autocheckpoint(queue *q, int pages);
int q_checkpoint(queue *q);

/* --- intake ---------------------------------------------------------------------------- */

enum q_kind { Q_RECORD, Q_TRIGGER, Q_CANCEL };
enum q_result {
	Q_QUEUED,    /* a job was created (202) */
	Q_DUPLICATE, /* this delivery id was seen before; nothing changed (200) */
	Q_ACTIVE,    /* trigger for (repo, issue) that already has an active job (200) */
	Q_CANCELLED, /* cancel processed; ncancelled jobs affected (200) */
	Q_RECORDED,  /* stored, nothing to do (200) */
	Q_FAILED,    /* storing failed; nothing changed (503) */
};

/* One verified delivery to store. Inputs are borrowed for the duration of q_ingest. */
typedef struct q_delivery {
	const char *delivery, *event;
	const char *body;
	size_t len;
	enum q_kind kind;
	const char *note; /* outcome detail stored with the delivery (ignore reason) */
	/* trigger / cancel target */
	const char *repo;
	int64_t repo_id, installation_id, issue;
	enum job_trigger trigger;
	const char *feedback;
	int64_t comment_id;
	/* The issue's title as the delivery carried it (may be NULL): a new job keeps it in
	 * job_state as "title" for the console. */
	const char *title;
	/* The body's stored form, when the submitter encoded it ahead with q_encode_body()
	 * (so the writer's transaction does not wait for the compression); q_ingest takes
	 * and frees it. */
	unsigned char *stored;
	size_t stored_len;
	bool encoded;
	/* outputs */
	enum q_result result;
	int64_t job_id; /* Q_QUEUED: the new job; Q_ACTIVE: the active one */
	int ncancelled; /* Q_CANCELLED */
} q_delivery;

/* Store n deliveries in ONE transaction (group commit): each is applied under its own
 * savepoint, so one bad item fails alone (Q_FAILED) while the rest commit. Returns 0 when the
 * transaction committed (each item's result says what happened), or a negative code when the
 * commit failed (every item is then Q_FAILED). It wakes no other process: after answering
 * the deliveries, the caller calls q_notify when one was Q_QUEUED (a round trip the answers
 * need not wait for). */
int q_ingest(queue *q, q_delivery **items, size_t n, int64_t now);

/* Called by q_ingest on its caller's thread when a try's statements are done, just before its
 * COMMIT (again for each further try of the same batch). The group-commit writers use it to
 * let the next batch start its statements while this one waits for the COMMIT. */
typedef void (*q_precommit_fn)(void *ud);
/* Set (or, with NULL, clear) q's hook; ud is passed to it. */
void q_set_precommit(queue *q, q_precommit_fn fn, void *ud);

/* Encode d's body as q_ingest would store it (zstd when that is smaller, else raw), on the
 * caller's thread; thread-safe. What it keeps in d is freed by q_ingest, or by
 * q_encoded_release when d is never ingested. */
void q_encode_body(queue *q, q_delivery *d);
void q_encoded_release(q_delivery *d);

/* --- workers --------------------------------------------------------------------------- */

/* Lease the oldest ready job (queued, not_before <= now) for owner until now + lease_ms;
 * counts an attempt, increases the job's fencing epoch (job->epoch) and records an event.
 * On PostgreSQL the row is picked with FOR UPDATE SKIP LOCKED, so replicas leasing at once
 * never wait for each other nor take the same job. The payload is decompressed. AP_ENOTFOUND
 * when none is ready. *out is freed with q_job_free(). */
int q_lease(queue *q, const char *owner, int64_t lease_ms, int64_t now, job_info **out);
void q_job_free(job_info *job);

/* For tests only (the workers extend leases with q_fence). Extend the lease. AP_ENOTFOUND when
 * owner no longer holds it (expired and re-queued). */
int q__heartbeat(queue *q, int64_t id, const char *owner, int64_t lease_ms, int64_t now);

/* A lease as its holder knows it: the job, the owner it was leased to and its epoch. */
typedef struct q_lease_ref {
	int64_t id;
	const char *owner;
	int64_t epoch;
} q_lease_ref;

/* Fencing: 0 while l is still the job's current lease (running, same owner and epoch, not
 * expired at now), and then the lease is extended to now + lease_ms; AP_ESTALE otherwise (the
 * job was rescued or re-leased: its holder must publish nothing and stop). With msg, an event
 * (and with stage, a stage change) is recorded in the same transaction, only when current. */
int q_fence(queue *q, const q_lease_ref *l, int64_t lease_ms, const char *stage, const char *msg,
	    int64_t now);

/* Terminal outcome of a leased job: state is "succeeded", "failed" or "cancelled"; text is
 * the result (succeeded) or the error. AP_ENOTFOUND when the lease was lost. */
int q_finish(queue *q, int64_t id, const char *owner, const char *state, const char *text,
	     int64_t now);

/* Put a leased job back: queued again at not_before with error noted. When refund is true
 * the attempt is not counted (shutdown interrupted it, not a failure of the job). */
int q_release(queue *q, int64_t id, const char *owner, int64_t not_before, const char *error,
	      bool refund, int64_t now);

/* Running jobs whose lease ended before now (their process died) go back to queued, or to
 * failed once attempts reached max_attempts, or to cancelled when a cancel was requested.
 * *count (may be NULL) receives how many were handled. */
int q_requeue_expired(queue *q, int max_attempts, int64_t now, int *count);

/* Retry delay after the given attempt: base_ms * 2^(attempts-1), at most one hour. */
int64_t q_backoff_ms(int64_t base_ms, int attempts);

/* --- cancellation, events, state ------------------------------------------------------- */

/* Cancel the active job of (repo, issue): a queued one at once, a running one by setting
 * cancel_requested. A queued one whose state has a "comment_id" (an earlier attempt posted a
 * progress comment) gets cancel_requested and becomes due now instead, so a worker runs it
 * with the cancel already set and the pipeline edits the comment to say so. *count (may be
 * NULL) = jobs affected. */
int q_cancel(queue *q, const char *repo, int64_t issue, const char *why, int64_t now, int *count);

/* *yes = the job's cancel_requested flag. */
int q_cancel_requested(queue *q, int64_t id, bool *yes);

/* For tests only (jobs write events through q_fence). Append an event; stage (may be NULL)
 * also becomes the job's stage. */
int q__event(queue *q, int64_t id, const char *stage, const char *msg, int64_t now);

int q_state_set(queue *q, int64_t id, const char *key, const char *value);
/* *value is malloc'd (caller frees) or NULL when unset. */
int q_state_get(queue *q, int64_t id, const char *key, char **value);

/* --- spending (costs and daily budgets) ------------------------------------------------ */

/* Open one run's row in the spending ledger (table spend: one row per run, keyed by its own
 * id, with the job, repository and UTC day of now). In one BEGIN IMMEDIATE transaction: sum
 * what the day carries globally and for repo (closed rows: spent; open rows: the larger of
 * reserved and spent), refuse when either sum + req->reserve_micro exceeds its cap (> 0),
 * else insert the row holding the reserve. Refused: 0, out->refused, *row = 0. */
int q_spend_open(queue *q, int64_t job, const char *repo, const job_spend_req *req, int64_t now,
		 int64_t *row, job_spend_verdict *out);

/* Set the row's usage (absolute values for the run); close releases its hold. */
int q_spend_record(queue *q, int64_t row, const job_usage *u, bool close);

/* For tests only. What the UTC day of now carries (micro-dollars, as q_spend_open counts it), for
 * repo or, with repo NULL, for all repositories. */
int q__spend_day(queue *q, const char *repo, int64_t now, int64_t *micro);

/* --- coordination between replicas ---------------------------------------------------- */

/* Reserve the next write slot of a GitHub installation shared by every process on the
 * database: slots are spacing_ms apart; *wait_ms (>= 0) is how long to sleep before the
 * write. */
int q_pace(queue *q, int64_t installation, int64_t spacing_ms, int64_t now, int64_t *wait_ms);

/* Wake pollers in other processes (a job became ready). A no-op on SQLite. */
int q_notify(queue *q);

/* Wait up to timeout_ms for another process's q_notify; *woken says whether one came. Only a
 * hint: pollers still poll. On SQLite it sleeps timeout_ms and *woken stays false. */
int q_wait_wake(queue *q, int timeout_ms, bool *woken);

/* Put a failed or cancelled job back in the queue as new (attempts 0, due now), with the
 * event why. AP_EINVAL when the job is not failed or cancelled (or does not exist),
 * AP_EDUPLICATE when its issue already has an active job. */
int q_retry(queue *q, int64_t id, const char *why, int64_t now);

const char *q_stage_name(enum job_stage stage);

#endif
