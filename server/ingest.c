/* SPDX-License-Identifier: MIT */
/* server/ingest.c - the group-commit writer threads (see ingest.h). */
#include "server/ingest.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

/* A batch larger than this is split: it bounds the time one transaction holds the lock. */
#define ING_BATCH_MAX 512

/* How often the background checkpointer looks for committed work. */
#define ING_CHECKPOINT_MS 250

/* Writers on a shared database (PostgreSQL): while one batch waits for its COMMIT, the next
 * one runs its statements on the second connection. SQLite has one writer: a second
 * connection would only wait for the first's lock. */
#define ING_WRITERS_SHARED 2

struct writer {
	ingest *ing;
	queue *q;		  /* this writer's own connection */
	unsigned long ckpts_seen; /* ing->ckpts when this writer last caught up (under lock) */
	pthread_t thread;
	bool started;
};

struct ingest {
	queue *q;      /* the first writer's connection; bodies are encoded with its contexts */
	queue *ckpt_q; /* the checkpointer's own connection (SQLite only) */
	struct writer w[ING_WRITERS_SHARED];
	int nwriters;
	pthread_t ckpt_thread;
	bool ckpt_started;
	unsigned long commits; /* batches committed, under lock */
	unsigned long ckpts;   /* background checkpoints finished, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* items submitted, the turn given back, a batch done, or stopping */
	pthread_cond_t ckpt_cond; /* stopping (the checkpointer otherwise wakes on a timer) */
	ing_item *head, *tail;
	/* One writer at a time has the turn: it takes a batch and runs its statements. It gives
	 * the turn back just before its COMMIT (q_set_precommit), so the next batch's statements
	 * come after this one's: a later delivery for the same issue or with the same id then
	 * waits for this batch's rows (row locks, unique indexes) and sees them. A batch with a
	 * cancel keeps the turn to its end and starts only when no other batch is committing:
	 * the cancel must see the job a trigger before it created, and an uncommitted job is
	 * invisible to it. NULL: nobody has it. */
	struct writer *turn;
	int in_flight; /* batches taken and not yet done */
	bool stopping;
	size_t max_batch;
	ing_queued_fn on_queued;
	void *ud;
};

/* Give the turn back if w has it (under ing->lock). */
static void give_turn_locked(struct writer *w)
{
	if (w->ing->turn != w)
		return;
	w->ing->turn = NULL;
	pthread_cond_broadcast(&w->ing->cond);
}

/* q_ingest's hook: statements done, COMMIT next. */
static void before_commit(void *ud)
{
	struct writer *w = ud;

	pthread_mutex_lock(&w->ing->lock);
	give_turn_locked(w);
	pthread_mutex_unlock(&w->ing->lock);
}

static void *writer(void *arg)
{
	struct writer *w = arg;
	ingest *ing = w->ing;
	q_delivery *batch[ING_BATCH_MAX];
	ing_item *items[ING_BATCH_MAX];

	for (;;) {
		size_t n = 0;
		bool queued = false, cancels = false, catch_up;

		pthread_mutex_lock(&ing->lock);
		while ((!ing->head || ing->turn) && !(ing->stopping && !ing->head))
			pthread_cond_wait(&ing->cond, &ing->lock);
		if (!ing->head) { /* stopping, and nothing left */
			pthread_mutex_unlock(&ing->lock);
			break;
		}
		ing->turn = w;
		ing->in_flight++;
		while (ing->head && n < ING_BATCH_MAX) {
			items[n] = ing->head;
			batch[n] = &ing->head->d;
			cancels |= ing->head->d.kind == Q_CANCEL;
			ing->head = ing->head->next;
			n++;
		}
		if (!ing->head)
			ing->tail = NULL;
		if (n > ing->max_batch)
			ing->max_batch = n;
		/* Only another writer's COMMIT can be in flight here (it gave the turn back). */
		while (cancels && ing->in_flight > 1)
			pthread_cond_wait(&ing->cond, &ing->lock);
		pthread_mutex_unlock(&ing->lock);

		q_set_precommit(w->q, cancels ? NULL : before_commit, w);
		if (q_ingest(w->q, batch, n, ap_wall_ms()))
			ap_err("storing %zu deliveries failed: %s", n, ap_error_last());
		pthread_mutex_lock(&ing->lock);
		give_turn_locked(w); /* when the batch failed before its COMMIT, or had cancels */
		ing->in_flight--;
		ing->commits++;
		catch_up = ing->ckpts != w->ckpts_seen;
		w->ckpts_seen = ing->ckpts;
		pthread_cond_broadcast(&ing->cond);
		pthread_mutex_unlock(&ing->lock);
		for (size_t i = 0; i < n; i++) {
			if (items[i]->d.result == Q_QUEUED)
				queued = true;
			items[i]->next = NULL;
			items[i]->done(items[i]);
		}
		if (queued) {
			/* Other replicas' workers: after the answers, which need not wait. */
			if (q_notify(w->q))
				ap_debug("waking other replicas failed: %s", ap_error_last());
			if (ing->on_queued)
				ing->on_queued(ing->ud);
		}
		/* The background checkpoint just finished, but this writer kept committing while it
		 * ran: those last frames are copied here, between two batches, so the WAL is fully
		 * copied when the next transaction starts and SQLite writes it again from its first
		 * frame. Without this a writer that never pauses for a whole checkpoint never lets
		 * the WAL restart: it grew by ~40 MB/s under load (every frame a new block of the
		 * file, every fdatasync a change of its size). The tail is what one checkpoint's
		 * run took; after the answers, so no 2xx waits for it. */
		if (catch_up && q_checkpoint(w->q))
			ap_warn("WAL checkpoint failed: %s", ap_error_last());
	}
	return NULL;
}

/* Checkpoints the WAL in the background so no COMMIT of the writer pays for one. */
static void *checkpointer(void *arg)
{
	ingest *ing = arg;
	unsigned long done = 0;

	pthread_mutex_lock(&ing->lock);
	while (!ing->stopping) {
		struct timespec ts;

		ap_deadline_in(&ts, CLOCK_REALTIME, ING_CHECKPOINT_MS);
		pthread_cond_timedwait(&ing->ckpt_cond, &ing->lock, &ts);
		if (ing->commits == done || ing->stopping)
			continue;
		done = ing->commits;
		pthread_mutex_unlock(&ing->lock);
		if (q_checkpoint(ing->ckpt_q))
			ap_warn("WAL checkpoint failed: %s", ap_error_last());
		pthread_mutex_lock(&ing->lock);
		ing->ckpts++;
	}
	pthread_mutex_unlock(&ing->lock);
	return NULL;
}

int ing_new(ingest **out, const char *path, ing_queued_fn on_queued, void *ud)
{
	ingest *ing;
	int rc;

	*out = NULL;
	ing = calloc(1, sizeof(*ing));
	if (!ing)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_init(&ing->lock, NULL);
	pthread_cond_init(&ing->cond, NULL);
	pthread_cond_init(&ing->ckpt_cond, NULL);
	ing->on_queued = on_queued;
	ing->ud = ud;
	if ((rc = q_open(&ing->q, path, Q_OPEN_CREATE)))
		goto out_stop;
	ing->nwriters = q_shared(ing->q) ? ING_WRITERS_SHARED : 1;
	/* The checkpointer is SQLite's: PostgreSQL checkpoints by itself. */
	if (!q_shared(ing->q) && (rc = q_open(&ing->ckpt_q, path, Q_OPEN_CREATE)))
		goto out_stop;
	ing->w[0].q = ing->q;
	for (int i = 1; i < ing->nwriters; i++)
		if ((rc = q_open(&ing->w[i].q, path, Q_OPEN_CREATE)))
			goto out_stop;
	for (int i = 0; i < ing->nwriters; i++) {
		ing->w[i].ing = ing;
		if (pthread_create(&ing->w[i].thread, NULL, writer, &ing->w[i])) {
			rc = ap_error_set(AP_ENOMEM, "cannot start the database writer thread");
			goto out_stop;
		}
		ing->w[i].started = true;
	}
	/* Without the checkpointer the writer checkpoints itself: slower, still correct. */
	if (ing->ckpt_q && q_autocheckpoint(ing->q, 0) == 0 &&
	    pthread_create(&ing->ckpt_thread, NULL, checkpointer, ing) == 0)
		ing->ckpt_started = true;
	else
		q_autocheckpoint(ing->q, 1000);
	*out = ing;
	return 0;
out_stop:
	ing_free(ing);
	return rc;
}

void ing_submit(ingest *ing, ing_item *item)
{
	item->next = NULL;
	/* Compressed on the submitter's thread, in parallel with the writer's COMMIT: every
	 * submitter waits for the writer, which then spends its time on statements only. */
	q_encode_body(ing->q, &item->d);
	pthread_mutex_lock(&ing->lock);
	if (ing->stopping) {
		pthread_mutex_unlock(&ing->lock);
		q_encoded_release(&item->d);
		item->d.result = Q_FAILED;
		item->done(item);
		return;
	}
	if (ing->tail)
		ing->tail->next = item;
	else
		ing->head = item;
	ing->tail = item;
	/* Broadcast: a writer may be waiting on cond for something else (another's COMMIT). */
	pthread_cond_broadcast(&ing->cond);
	pthread_mutex_unlock(&ing->lock);
}

size_t ing_max_batch(ingest *ing)
{
	size_t n;

	pthread_mutex_lock(&ing->lock);
	n = ing->max_batch;
	pthread_mutex_unlock(&ing->lock);
	return n;
}

int ing__writers(ingest *ing)
{
	return ing->nwriters;
}

/* Also ing_new's cleanup: stops the writers that started and closes every connection. */
void ing_free(ingest *ing)
{
	if (!ing)
		return;
	pthread_mutex_lock(&ing->lock);
	ing->stopping = true;
	pthread_cond_broadcast(&ing->cond);
	pthread_cond_broadcast(&ing->ckpt_cond);
	pthread_mutex_unlock(&ing->lock);
	for (int i = 0; i < ing->nwriters; i++)
		if (ing->w[i].started)
			pthread_join(ing->w[i].thread, NULL);
	if (ing->ckpt_started)
		pthread_join(ing->ckpt_thread, NULL);
	for (int i = 0; i < ing->nwriters; i++)
		if (ing->w[i].q != ing->q)
			q_close(ing->w[i].q);
	q_close(ing->ckpt_q);
	q_close(ing->q);
	pthread_cond_destroy(&ing->ckpt_cond);
	pthread_cond_destroy(&ing->cond);
	pthread_mutex_destroy(&ing->lock);
	free(ing);
}
