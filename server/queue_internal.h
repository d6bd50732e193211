/* SPDX-License-Identifier: MIT */
/* server/queue_internal.h - what the queue's own files share (queue.c, queue_body.c,
 * queue_spend.c, queue_view.c): the handle's layout, the statement helpers over the driver
 * table (queue_db.h) and the stored body's encodings. Nothing outside server/queue*.c
 * includes it. */
#ifndef AP_QUEUE_INTERNAL_H
#define AP_QUEUE_INTERNAL_H

#include "server/queue_db.h"

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

/* (queue.h is not included here: it would make queue.c and this header a cycle; the
 * handle is `struct queue`, which queue.h names `queue`.) */

/* A stored body never inflates past this (the webhook body cap plus room). */
#define Q_BODY_MAX ((size_t)32 * 1024 * 1024)

/* deliveries.body_encoding */
enum { BODY_RAW = 0, BODY_ZLIB = 1, BODY_ZSTD = 2 };

/* zstd's level for stored bodies: its fastest positive level, smaller than zlib's level 1
 * and about three times as fast. */
#define Q_ZSTD_LEVEL 1

/* Compression contexts per handle: one for each of the (default at most 4) HTTP threads that
 * may store a body at once; a fifth waits for the first context. */
#define Q_ZCTX 4

struct queue {
	const q__driver *drv;
	q__db *db;
	pthread_mutex_t lock;
	/* Compression contexts kept for the bodies this handle stores (each under its zlock,
	 * outside lock): a fresh one per body costs as much as the compression itself, and
	 * several let HTTP threads compress at the same time. */
	pthread_mutex_t zlock[Q_ZCTX];
	ZSTD_CCtx *zc[Q_ZCTX];
	void (*precommit)(void *ud); /* see q_set_precommit */
	void *precommit_ud;
};

/* ---- invariants (debug builds; nothing under NDEBUG) -------------------------------------
 *
 * Programmer errors only: what a caller of queue.h must pass and what the queue's own SQL
 * guarantees. Rows read back from the database are data and get an error, not an assert. */

/* A lease is named by a job id and a non-empty owner. */
static inline void q__assert_lease(int64_t id, const char *owner)
{
	(void)id;
	(void)owner;
	assert(id > 0 && owner && owner[0]);
}

/* An UPDATE by primary key changed no row (the guard did not match) or one. */
static inline void q__assert_by_id(int64_t changed)
{
	(void)changed;
	assert(changed == 0 || changed == 1);
}

#define ARGS(...)                                                                                  \
	(const q__val[]){__VA_ARGS__}, (int)(sizeof((q__val[]){__VA_ARGS__}) / sizeof(q__val))

/* One statement; rows and changes may be NULL. */
int q__x(struct queue *q, const char *sql, const q__val *args, int nargs, q__res **rows,
	 int64_t *changes);

/* One statement whose answer is one integer (count, max, an id): the first column of the
 * first row in *out, 0 when there is no row or it is NULL. */
int q__int(struct queue *q, const char *sql, const q__val *args, int nargs, int64_t *out);

/* A statement without parameters or rows (BEGIN, COMMIT, SAVEPOINT ...). */
int q__sx(struct queue *q, const char *sql);

/* Roll back the open transaction, keeping the message of the failure that caused it. */
void q__rollback(struct queue *q);

/* A stored body (encoding: BODY_*) as text in *out (malloc'd, NUL-terminated; the caller
 * frees), inflated to at most Q_BODY_MAX. 0, or AP_EIO / AP_ETOOBIG / AP_ENOMEM. */
int q__inflate_body(unsigned char *stored, size_t n, int64_t encoding, char **out);

#endif
