/* SPDX-License-Identifier: MIT */
/* common/buf.c - capped growable buffer (see buf.h). */
#include "common/buf.h"

#include "common/err.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* buf.h's invariants, asserted at the entry and exit of every function that changes b (debug
 * builds; nothing under NDEBUG). */
static void check_invariants(const ap_buf *b)
{
	(void)b;
	assert(b->len <= b->cap);
	assert(b->data ? b->len < b->alloc && b->data[b->len] == '\0'
		       : b->len == 0 && b->alloc == 0);
}

void ap_buf_init(ap_buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
	check_invariants(b);
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
	int rc;

	check_invariants(b);
	rc = buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	check_invariants(b);
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

	check_invariants(b);
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
	check_invariants(b);
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

int ap_fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	assert(dst && cap > 0);
	va_start(ap, fmt);
	n = vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
	if (n < 0)
		return ap_error_set(AP_EINVAL, "bad format string");
	if ((size_t)n >= cap)
		return ap_error_set(AP_ETOOBIG, "\"%.60s...\" would be cut at %zu bytes", dst,
				    cap - 1);
	return 0;
}

bool ap_excerpt(char *dst, size_t cap, const char *s)
{
	size_t n = strlen(s), keep;

	assert(dst && cap >= 4);
	if (n < cap) {
		memmove(dst, s, n + 1);
		return false;
	}
	keep = ap_utf8_prefix(s, n, cap - 4);
	memmove(dst, s, keep);
	memcpy(dst + keep, "...", 4);
	return true;
}

void ap_buf_reset(ap_buf *b)
{
	ap_buf_truncate(b, 0);
}

void ap_buf_truncate(ap_buf *b, size_t len)
{
	check_invariants(b);
	assert(len <= b->len);
	if (len > b->len)
		return;
	b->len = len;
	if (b->data)
		b->data[len] = '\0';
	check_invariants(b);
}

char *ap_buf_take(ap_buf *b)
{
	char *p;

	check_invariants(b);
	p = b->data ? b->data : strdup("");
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	check_invariants(b);
	return p;
}

const char *ap_buf_str(const ap_buf *b)
{
	check_invariants(b);
	return b->data ? b->data : "";
}

void ap_buf_release(ap_buf *b)
{
	if (!b)
		return;
	check_invariants(b);
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	check_invariants(b);
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

/* ---- UTF-8 text from outside ---------------------------------------------------------------- */

#define REPLACEMENT_CP 0xFFFDu

uint32_t ap_utf8_decode(const char *str, size_t n, size_t *used)
{
	const unsigned char *s = (const unsigned char *)str;
	uint32_t c = s[0], min;
	size_t k;

	*used = 1;
	if (c < 0x80)
		return c;
	if (c >= 0xC2 && c <= 0xDF) {
		k = 1;
		c &= 0x1F;
		min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		k = 2;
		c &= 0x0F;
		min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		k = 3;
		c &= 0x07;
		min = 0x10000;
	} else {
		return REPLACEMENT_CP;
	}
	if (n < k + 1)
		return REPLACEMENT_CP;
	for (size_t i = 1; i <= k; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return REPLACEMENT_CP;
		c = (c << 6) | (s[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return REPLACEMENT_CP;
	*used = k + 1;
	return c;
}

size_t ap_utf8_encode(char out[4], uint32_t c)
{
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xC0 | (c >> 6));
		out[1] = (char)(0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xE0 | (c >> 12));
		out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		out[2] = (char)(0x80 | (c & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (c >> 18));
	out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
	out[3] = (char)(0x80 | (c & 0x3F));
	return 4;
}

/* The unit at s[0..n) that cleaning must rewrite: true with *len its length in s and r[0..*rl)
 * what replaces it; false (with *len the character's length) for a character kept as is. */
static bool utf8_unit(const char *s, size_t n, enum ap_utf8_mode mode, size_t *len, char r[5],
		      size_t *rl)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b = (unsigned char)s[0];
	uint32_t c;

	*len = 1;
	if (b && b < 0x80)
		return false;
	c = b ? ap_utf8_decode(s, n, len) : 0;
	if (b && (c != REPLACEMENT_CP || (*len == 3 && mode == AP_UTF8_REPLACE)))
		return false;
	memcpy(r, AP_UTF8_REPLACEMENT, 3);
	*rl = 3;
	if (mode == AP_UTF8_DISTINCT) {
		if (*len == 3) { /* a U+FFFD of the input */
			r[(*rl)++] = '~';
		} else {
			r[(*rl)++] = hex[b >> 4];
			r[(*rl)++] = hex[b & 15];
		}
	}
	return true;
}

size_t ap_utf8_clean(char *out, size_t max, const char *s, size_t n, enum ap_utf8_mode mode,
		     size_t *used)
{
	size_t i = 0, w = 0, run = 0, len, rl = 0, m;
	char r[5];

	if (!out)
		max = SIZE_MAX;
	for (;;) {
		while (i < n && !utf8_unit(s + i, n - i, mode, &len, r, &rl))
			i += len;
		/* s[run..i) is kept as it is: as much of it as fits, in whole characters */
		m = i - run;
		if (m > max - w)
			m = ap_utf8_prefix(s + run, i - run, max - w);
		if (out && m)
			memcpy(out + w, s + run, m);
		w += m;
		if (m < i - run) {
			i = run + m;
			break;
		}
		if (i >= n || rl > max - w)
			break;
		if (out)
			memcpy(out + w, r, rl);
		w += rl;
		i += len;
		run = i;
	}
	if (used)
		*used = i;
	return w;
}

bool ap_utf8_valid(const char *s, size_t n)
{
	size_t len, rl;
	char r[5];

	for (size_t i = 0; i < n; i += len)
		if (utf8_unit(s + i, n - i, AP_UTF8_REPLACE, &len, r, &rl))
			return false;
	return true;
}

char *ap_utf8_clean_dup(const char *s, size_t n)
{
	bool valid = ap_utf8_valid(s, n);
	size_t len = valid ? n : ap_utf8_clean(NULL, 0, s, n, AP_UTF8_REPLACE, NULL);
	char *out = malloc(len + 1);

	if (!out)
		return NULL;
	if (valid && n)
		memcpy(out, s, n);
	else
		ap_utf8_clean(out, len, s, n, AP_UTF8_REPLACE, NULL);
	out[len] = '\0';
	return out;
}
