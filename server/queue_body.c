/* SPDX-License-Identifier: MIT */
/* server/queue_body.c - the stored form of a delivery's body: zstd when that is smaller,
 * raw otherwise, and older rows in zlib; inflated with a cap (queue.h, q_encode_body). */
#include "common/buf.h"
#include "common/err.h"
#include "server/queue.h"
#include "server/queue_db.h"
#include "server/queue_internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

/* A zstd copy of body when that is smaller, else NULL (stored raw), from q's kept
 * context. */
static unsigned char *compress_body(queue *q, const char *body, size_t len, size_t *zlen)
{
	unsigned char *z = NULL;
	size_t n, got;
	int i;

	*zlen = 0;
	if (len < 64 || len > Q_BODY_MAX)
		return NULL;
	/* The first free context; all busy: wait for the first. */
	for (i = 0; i < Q_ZCTX && pthread_mutex_trylock(&q->zlock[i]); i++)
		;
	if (i == Q_ZCTX)
		pthread_mutex_lock(&q->zlock[i = 0]);
	if (!q->zc[i] && !(q->zc[i] = ZSTD_createCCtx()))
		goto out_unlock;
	n = ZSTD_compressBound(len);
	z = malloc(n);
	if (!z)
		goto out_unlock;
	got = ZSTD_compressCCtx(q->zc[i], z, n, body, len, Q_ZSTD_LEVEL);
	if (ZSTD_isError(got) || got >= len) {
		free(z);
		z = NULL;
		goto out_unlock;
	}
	*zlen = got;
out_unlock:
	pthread_mutex_unlock(&q->zlock[i]);
	return z;
}

void q_encode_body(queue *q, q_delivery *d)
{
	size_t zlen = 0;
	unsigned char *z;

	if (d->encoded || d->kind == Q_RECORD)
		return;
	/* NULL: stored raw, as q_ingest would (no gain, or no memory for the copy). */
	z = compress_body(q, d->body, d->len, &zlen);
	d->stored = z;
	d->stored_len = zlen;
	d->encoded = true;
}

void q_encoded_release(q_delivery *d)
{
	free(d->stored);
	d->stored = NULL;
	d->stored_len = 0;
	d->encoded = false;
}

/* A zstd frame (written with its size, as compress_body writes it), decoded into a
 * NUL-terminated malloc'd string; takes stored. */
static int unzstd_body(unsigned char *stored, size_t n, char **out)
{
	unsigned long long size = ZSTD_getFrameContentSize(stored, n);
	char *s;
	size_t got;

	*out = NULL;
	if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR ||
	    size > Q_BODY_MAX) {
		free(stored);
		return ap_error_set(AP_EINVAL, "stored body does not decompress");
	}
	s = malloc((size_t)size + 1);
	if (!s) {
		free(stored);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	got = ZSTD_decompress(s, (size_t)size, stored, n);
	free(stored);
	if (ZSTD_isError(got) || got != size) {
		free(s);
		return ap_error_set(AP_EINVAL, "stored body does not decompress");
	}
	s[size] = '\0';
	*out = s;
	return 0;
}

/* The body as stored, decoded into a NUL-terminated malloc'd string. */
int q__inflate_body(unsigned char *stored, size_t n, int64_t encoding, char **out)
{
	ap_buf b = AP_BUF_INIT(Q_BODY_MAX);
	unsigned char chunk[16384];
	z_stream zs;
	int zr, rc = 0;

	*out = NULL;
	if (encoding == BODY_RAW) {
		*out = (char *)stored;
		return 0;
	}
	if (encoding == BODY_ZSTD)
		return unzstd_body(stored, n, out);
	if (encoding != BODY_ZLIB) {
		free(stored);
		return ap_error_set(AP_EINVAL, "stored body has an unknown encoding %lld",
				    (long long)encoding);
	}
	memset(&zs, 0, sizeof(zs));
	if (inflateInit(&zs) != Z_OK) {
		free(stored);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	zs.next_in = stored;
	zs.avail_in = (uInt)n;
	do {
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		zr = inflate(&zs, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END) {
			rc = ap_error_set(AP_EINVAL, "stored body does not decompress");
			break;
		}
		if ((rc = ap_buf_add(&b, chunk, sizeof(chunk) - zs.avail_out)))
			break;
	} while (zr != Z_STREAM_END);
	inflateEnd(&zs);
	free(stored);
	if (rc == 0 && !b.data)
		rc = ap_buf_adds(&b, "");
	if (rc) {
		ap_buf_release(&b);
		return rc;
	}
	*out = ap_buf_take(&b);
	return 0;
}
