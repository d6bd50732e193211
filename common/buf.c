/* SPDX-License-Identifier: MIT */
/* common/buf.c - capped growable buffer (see buf.h). */
#include "common/buf.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ap_buf_init(ap_buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
}

static int buf_reserve(ap_buf *b, size_t n)
{
	size_t want, nalloc;
	char *p;

	if (n > b->cap || b->len > b->cap - n)
		return ap_error_set(AP_ETOOBIG, "buffer cap of %zu bytes reached", b->cap);
	want = b->len + n + 1;
	if (want <= b->alloc)
		return 0;
	nalloc = b->alloc ? b->alloc : 64;
	while (nalloc < want)
		nalloc = nalloc > ((size_t)-1) / 2 ? want : nalloc * 2;
	p = realloc(b->data, nalloc);
	if (!p)
		return ap_error_set(AP_ENOMEM, "out of memory growing a buffer to %zu bytes",
				    nalloc);
	b->data = p;
	b->alloc = nalloc;
	return 0;
}

int ap_buf_add(ap_buf *b, const void *p, size_t n)
{
	int rc = buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int ap_buf_adds(ap_buf *b, const char *s)
{
	return ap_buf_add(b, s, strlen(s));
}

int ap_buf_vaddf(ap_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n, rc;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return ap_error_set(AP_EINVAL, "bad format string");
	rc = buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int ap_buf_addf(ap_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = ap_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void ap_buf_reset(ap_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

char *ap_buf_take(ap_buf *b)
{
	char *p = b->data ? b->data : strdup("");

	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}

const char *ap_buf_str(const ap_buf *b)
{
	return b->data ? b->data : "";
}

void ap_buf_release(ap_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

size_t ap_utf8_prefix(const char *s, size_t n, size_t max)
{
	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

size_t ap_utf8_cut(const char *s, size_t max)
{
	return ap_utf8_prefix(s, strlen(s), max);
}
