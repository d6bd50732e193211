/* SPDX-License-Identifier: MIT */
/* server/ingest.h - group commit: writer threads store deliveries in batches.
 *
 * HTTP handlers submit verified deliveries and wait (their connection suspended) for the
 * batch's COMMIT; a writer takes everything pending, applies it in one transaction
 * (q_ingest) and calls each item's done callback after the COMMIT returned. So a 2xx never
 * goes out before its rows are durable, and N concurrent deliveries cost one fsync.
 *
 * SQLite has one writer. PostgreSQL has two, each on its own connection: while one batch
 * waits for its COMMIT (the server's WAL flush), the next runs its statements, which start
 * only after the previous batch's are done, so deliveries of one issue keep their order (a
 * batch with a cancel waits until no other is committing; see ingest.c).
 */
#ifndef AP_INGEST_H
#define AP_INGEST_H

#include "server/queue.h"

typedef struct ingest ingest;
typedef struct ing_item ing_item;

/* Called on a writer thread after the batch holding item committed (or failed: then
 * item->d.result is Q_FAILED). The item belongs to the submitter again from this call on. */
typedef void (*ing_done_fn)(ing_item *item);

struct ing_item {
	q_delivery d; /* inputs and, after done, results */
	ing_done_fn done;
	void *ud;	/* the submitter's */
	ing_item *next; /* internal */
};

/* Called on a writer thread after each batch that queued at least one job. */
typedef void (*ing_queued_fn)(void *ud);

/* Start the writers, each on its own connection to the database at path. */
int ing_new(ingest **out, const char *path, ing_queued_fn on_queued, void *ud);

/* Hand an item to the writer. Never blocks on the database. After ing_free started, items are
 * failed at once (done is called on the caller's thread). */
void ing_submit(ingest *ing, ing_item *item);

/* For tests only: how many writer threads ing runs (1 on SQLite, 2 on PostgreSQL). */
int ing__writers(ingest *ing);

/* Largest batch committed so far (for metrics). */
size_t ing_max_batch(ingest *ing);

/* Commit everything already submitted, stop the writer and free. Accepts NULL. */
void ing_free(ingest *ing);

#endif
