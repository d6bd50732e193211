/* SPDX-License-Identifier: MIT */
/* server/ingest.c - the group-commit writer thread (see ingest.h). */
#include "server/ingest.h"
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

struct ingest {
	queue *q;
	queue *ckpt_q; /* the checkpointer's own connection */
	pthread_t thread, ckpt_thread;
	bool ckpt_started;
	unsigned long commits; /* batches committed, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;	  /* items submitted, or stopping */
	pthread_cond_t ckpt_cond; /* stopping (the checkpointer otherwise wakes on a timer) */
	ing_item *head, *tail;
	bool stopping;
	size_t max_batch;
	ing_queued_fn on_queued;
	void *ud;
};

static void *writer(void *arg)
{
	ingest *ing = arg;
	q_delivery *batch[ING_BATCH_MAX];
	ing_item *items[ING_BATCH_MAX];

	for (;;) {
		size_t n = 0;
		bool queued = false;

		pthread_mutex_lock(&ing->lock);
		while (!ing->head && !ing->stopping)
			pthread_cond_wait(&ing->cond, &ing->lock);
		if (!ing->head && ing->stopping) {
			pthread_mutex_unlock(&ing->lock);
			break;
		}
		while (ing->head && n < ING_BATCH_MAX) {
			items[n] = ing->head;
			batch[n] = &ing->head->d;
			ing->head = ing->head->next;
			n++;
		}
		if (!ing->head)
			ing->tail = NULL;
		if (n > ing->max_batch)
			ing->max_batch = n;
		pthread_mutex_unlock(&ing->lock);

		if (q_ingest(ing->q, batch, n, q_now_ms()))
			ap_err("storing %zu deliveries failed: %s", n, ap_error_last());
		pthread_mutex_lock(&ing->lock);
		ing->commits++;
		pthread_mutex_unlock(&ing->lock);
		for (size_t i = 0; i < n; i++) {
			if (items[i]->d.result == Q_QUEUED)
				queued = true;
			items[i]->next = NULL;
			items[i]->done(items[i]);
		}
		if (queued) {
			/* Other replicas' workers: after the answers, which need not wait. */
			if (q_notify(ing->q))
				ap_debug("waking other replicas failed: %s", ap_error_last());
			if (ing->on_queued)
				ing->on_queued(ing->ud);
		}
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

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += ING_CHECKPOINT_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ing->ckpt_cond, &ing->lock, &ts);
		if (ing->commits == done || ing->stopping)
			continue;
		done = ing->commits;
		pthread_mutex_unlock(&ing->lock);
		if (q_checkpoint(ing->ckpt_q))
			ap_warn("WAL checkpoint failed: %s", ap_error_last());
		pthread_mutex_lock(&ing->lock);
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
	if ((rc = q_open(&ing->q, path, Q_OPEN_CREATE)))
		goto out_free;
	if ((rc = q_open(&ing->ckpt_q, path, Q_OPEN_CREATE))) {
		q_close(ing->ckpt_q);
		q_close(ing->q);
		goto out_free;
	}
	pthread_mutex_init(&ing->lock, NULL);
	pthread_cond_init(&ing->cond, NULL);
	pthread_cond_init(&ing->ckpt_cond, NULL);
	ing->on_queued = on_queued;
	ing->ud = ud;
	if (pthread_create(&ing->thread, NULL, writer, ing)) {
		rc = ap_error_set(AP_ENOMEM, "cannot start the database writer thread");
		goto out_close;
	}
	/* Without the checkpointer the writer checkpoints itself: slower, still correct. */
	if (q_autocheckpoint(ing->q, 0) == 0 &&
	    pthread_create(&ing->ckpt_thread, NULL, checkpointer, ing) == 0)
		ing->ckpt_started = true;
	else
		q_autocheckpoint(ing->q, 1000);
	*out = ing;
	return 0;
out_close:
	pthread_cond_destroy(&ing->ckpt_cond);
	pthread_cond_destroy(&ing->cond);
	pthread_mutex_destroy(&ing->lock);
	q_close(ing->ckpt_q);
	q_close(ing->q);
out_free:
	free(ing);
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
	pthread_cond_signal(&ing->cond);
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

void ing_free(ingest *ing)
{
	if (!ing)
		return;
	pthread_mutex_lock(&ing->lock);
	ing->stopping = true;
	pthread_cond_broadcast(&ing->cond);
	pthread_cond_broadcast(&ing->ckpt_cond);
	pthread_mutex_unlock(&ing->lock);
	pthread_join(ing->thread, NULL);
	if (ing->ckpt_started)
		pthread_join(ing->ckpt_thread, NULL);
	pthread_cond_destroy(&ing->ckpt_cond);
	pthread_cond_destroy(&ing->cond);
	pthread_mutex_destroy(&ing->lock);
	q_close(ing->ckpt_q);
	q_close(ing->q);
	free(ing);
}
