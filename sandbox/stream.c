/* SPDX-License-Identifier: MIT */
/* sandbox/stream.c - frame demultiplexer and head+tail capture (see stream.h). */
#include "sandbox/stream.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sbx_demux_feed(sbx_demux *d, const void *data, size_t n, sbx_demux_fn fn, void *ud)
{
	const unsigned char *p = data;
	size_t take;

	if (d->failed)
		return ap_error_set(AP_EIO, "output stream already failed");
	while (n) {
		if (d->remaining) {
			take = n < d->remaining ? n : (size_t)d->remaining;
			if (fn)
				fn(ud, d->stream, (const char *)p, take);
			p += take;
			n -= take;
			d->remaining -= take;
			continue;
		}
		take = sizeof(d->hdr) - d->hdr_fill;
		if (take > n)
			take = n;
		memcpy(d->hdr + d->hdr_fill, p, take);
		d->hdr_fill += take;
		p += take;
		n -= take;
		if (d->hdr_fill < sizeof(d->hdr))
			break;
		d->hdr_fill = 0;
		if (d->hdr[0] > 2 || d->hdr[1] || d->hdr[2] || d->hdr[3]) {
			d->failed = true;
			return ap_error_set(AP_EIO,
					    "malformed output frame header (%02x %02x %02x %02x)",
					    d->hdr[0], d->hdr[1], d->hdr[2], d->hdr[3]);
		}
		d->stream = d->hdr[0] == 2 ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT;
		d->remaining = (uint64_t)d->hdr[4] << 24 | (uint64_t)d->hdr[5] << 16 |
			       (uint64_t)d->hdr[6] << 8 | (uint64_t)d->hdr[7];
	}
	return 0;
}

bool sbx_demux_at_boundary(const sbx_demux *d)
{
	return !d->failed && !d->remaining && !d->hdr_fill;
}

void sbx_capture_add(sbx_capture *c, const char *p, size_t n)
{
	size_t head_cap = c->cap / 2, take, chunk;

	c->total += n;
	if (c->head_len < head_cap && n) {
		if (!c->head) {
			c->head = malloc(head_cap);
			if (!c->head) {
				c->nomem = true;
				return;
			}
		}
		take = head_cap - c->head_len < n ? head_cap - c->head_len : n;
		memcpy(c->head + c->head_len, p, take);
		c->head_len += take;
		p += take;
		n -= take;
	}
	if (!n)
		return;
	if (!c->ring) {
		c->ring_cap = c->cap - head_cap;
		if (!c->ring_cap)
			return;
		c->ring = malloc(c->ring_cap);
		if (!c->ring) {
			c->nomem = true;
			return;
		}
	}
	/* Only the last ring_cap bytes of this piece can survive. */
	if (n > c->ring_cap) {
		p += n - c->ring_cap;
		n = c->ring_cap;
	}
	while (n) {
		chunk = c->ring_cap - c->ring_pos;
		if (chunk > n)
			chunk = n;
		memcpy(c->ring + c->ring_pos, p, chunk);
		c->ring_pos = (c->ring_pos + chunk) % c->ring_cap;
		c->ring_len = c->ring_len + chunk > c->ring_cap ? c->ring_cap : c->ring_len + chunk;
		p += chunk;
		n -= chunk;
	}
}

bool sbx_capture_truncated(const sbx_capture *c)
{
	return c->nomem || c->total > c->cap;
}

char *sbx_capture_take(sbx_capture *c, size_t *len)
{
	char marker[80];
	size_t mlen = 0, start, first, total;
	char *out;

	if (sbx_capture_truncated(c))
		mlen = (size_t)snprintf(marker, sizeof(marker), "\n[... %llu bytes dropped ...]\n",
					(unsigned long long)(c->total - c->head_len - c->ring_len));
	total = c->head_len + mlen + c->ring_len;
	out = malloc(total + 1);
	if (!out)
		return NULL;
	if (c->head_len)
		memcpy(out, c->head, c->head_len);
	memcpy(out + c->head_len, marker, mlen);
	/* The oldest ring byte is at ring_pos once the ring is full, else at 0. */
	start = c->ring_len == c->ring_cap ? c->ring_pos : 0;
	first = c->ring_cap - start < c->ring_len ? c->ring_cap - start : c->ring_len;
	if (first)
		memcpy(out + c->head_len + mlen, c->ring + start, first);
	if (c->ring_len > first)
		memcpy(out + c->head_len + mlen + first, c->ring, c->ring_len - first);
	out[total] = '\0';
	*len = total;
	return out;
}

void sbx_capture_release(sbx_capture *c)
{
	if (!c)
		return;
	free(c->head);
	free(c->ring);
	c->head = NULL;
	c->ring = NULL;
	c->head_len = c->ring_len = c->ring_pos = 0;
	c->total = 0;
	c->nomem = false;
}
