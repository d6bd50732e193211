/* SPDX-License-Identifier: MIT */
/* common/redact.c - secret masking (see redact.h).
 *
 * Registered values are expanded once into literal variants (plain, base64 at three byte
 * alignments, URL-encoded, JSON-escaped); redaction replaces the leftmost-longest literal match
 * repeatedly. Token patterns are matched by pattern scanners after the literals.
 */
#include "redact.h"
#include "err.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SECRET_LEN 6

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static char **variants;
static size_t n_variants;
static size_t longest;

static int add_variant(const char *v, size_t len)
{
	char **nv;
	char *copy;

	if (len < MIN_SECRET_LEN)
		return 0;
	for (size_t i = 0; i < n_variants; i++)
		if (strcmp(variants[i], v) == 0)
			return 0;
	copy = strndup(v, len);
	if (!copy)
		return AP_ENOMEM;
	nv = realloc(variants, (n_variants + 1) * sizeof(*nv));
	if (!nv) {
		free(copy);
		return AP_ENOMEM;
	}
	variants = nv;
	variants[n_variants++] = copy;
	if (len > longest)
		longest = len;
	return 0;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 of value shifted by `shift` leading bytes, keeping only the characters that do not
 * depend on unknown neighbours, so the variant matches inside a longer encoded string. */
static int add_base64_variant(const char *v, size_t len, size_t shift)
{
	size_t total = len + shift, out_len = 0, start, end;
	unsigned char *in = calloc(total + 3, 1);
	char *out = malloc((total + 2) / 3 * 4 + 1);
	int rc = AP_ENOMEM;

	if (!in || !out)
		goto out_free;
	memcpy(in + shift, v, len);
	for (size_t i = 0; i < total; i += 3) {
		unsigned n = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

		out[out_len++] = b64[(n >> 18) & 63];
		out[out_len++] = b64[(n >> 12) & 63];
		out[out_len++] = b64[(n >> 6) & 63];
		out[out_len++] = b64[n & 63];
	}
	/* Skip characters mixed with the unknown prefix; stop before the unknown suffix. */
	start = shift ? (shift * 8 + 5) / 6 : 0;
	end = (total * 8) / 6;
	rc = end > start ? add_variant(out + start, end - start) : 0;
out_free:
	free(in);
	free(out);
	return rc;
}

static int add_url_variant(const char *v, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(len * 3 + 1);
	size_t o = 0;
	int rc;

	if (!out)
		return AP_ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	rc = add_variant(out, o);
	free(out);
	return rc;
}

static int add_json_variant(const char *v, size_t len)
{
	char *out = malloc(len * 6 + 1);
	size_t o = 0;
	int rc;

	if (!out)
		return AP_ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (c == '\r') {
			out[o++] = '\\';
			out[o++] = 'r';
		} else if (c == '\t') {
			out[o++] = '\\';
			out[o++] = 't';
		} else {
			out[o++] = (char)c;
		}
	}
	rc = add_variant(out, o);
	free(out);
	return rc;
}

int redact_add_secret(const char *value)
{
	size_t len;
	int rc = 0;

	if (!value)
		return 0;
	len = strlen(value);
	if (len < MIN_SECRET_LEN)
		return 0;
	pthread_mutex_lock(&reg_lock);
	rc = add_variant(value, len);
	for (size_t s = 0; !rc && s < 3; s++)
		rc = add_base64_variant(value, len, s);
	if (!rc)
		rc = add_url_variant(value, len);
	if (!rc)
		rc = add_json_variant(value, len);
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

void redact_clear(void)
{
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < n_variants; i++)
		free(variants[i]);
	free(variants);
	variants = NULL;
	n_variants = 0;
	longest = 0;
	pthread_mutex_unlock(&reg_lock);
}

/* Leftmost, then longest, registered variant in in[0..len); returns its length or 0. */
static size_t find_literal(const char *in, size_t len, size_t *at)
{
	size_t best_at = len, best_len = 0;

	for (size_t i = 0; i < n_variants; i++) {
		const char *p = memmem(in, len, variants[i], strlen(variants[i]));
		size_t off, vl = strlen(variants[i]);

		if (!p)
			continue;
		off = (size_t)(p - in);
		if (off < best_at || (off == best_at && vl > best_len)) {
			best_at = off;
			best_len = vl;
		}
	}
	*at = best_at;
	return best_len;
}

char *redact_mem(const char *in, size_t len)
{
	ap_buf out = AP_BUF_INIT((size_t)-2);
	size_t at, n;

	pthread_mutex_lock(&reg_lock);
	while (len && (n = find_literal(in, len, &at)) > 0) {
		if (ap_buf_add(&out, in, at) || ap_buf_adds(&out, REDACT_MASK))
			goto fail;
		in += at + n;
		len -= at + n;
	}
	pthread_mutex_unlock(&reg_lock);
	if (ap_buf_add(&out, in, len))
		goto fail_unlocked;
	return ap_buf_take(&out);
fail:
	pthread_mutex_unlock(&reg_lock);
fail_unlocked:
	ap_buf_release(&out);
	return NULL;
}

char *redact_str(const char *in)
{
	return redact_mem(in, strlen(in));
}

int redact_buf(ap_buf *b)
{
	char *clean = redact_mem(ap_buf_str(b), b->len);

	if (!clean)
		return AP_ENOMEM;
	ap_buf_reset(b);
	int rc = ap_buf_adds(b, clean);
	free(clean);
	return rc;
}

struct redact_stream {
	redact_sink_fn sink;
	void *ud;
	ap_buf held;
};

int redact_stream_new(redact_stream **out, redact_sink_fn sink, void *ud)
{
	redact_stream *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return AP_ENOMEM;
	s->sink = sink;
	s->ud = ud;
	ap_buf_init(&s->held, (size_t)-2);
	*out = s;
	return 0;
}

int redact_stream_write(redact_stream *s, const char *p, size_t n)
{
	size_t keep;
	char *clean;
	int rc;

	rc = ap_buf_add(&s->held, p, n);
	if (rc)
		return rc;
	pthread_mutex_lock(&reg_lock);
	keep = longest ? longest - 1 : 0;
	pthread_mutex_unlock(&reg_lock);
	if (s->held.len <= keep)
		return 0;
	/* Emit only up to a newline, else everything but the possible start of a secret. */
	clean = redact_mem(s->held.data, s->held.len - keep);
	if (!clean)
		return AP_ENOMEM;
	s->sink(s->ud, clean, strlen(clean));
	free(clean);
	memmove(s->held.data, s->held.data + s->held.len - keep, keep);
	s->held.len = keep;
	s->held.data[keep] = '\0';
	return 0;
}

int redact_stream_flush(redact_stream *s)
{
	char *clean;

	if (!s->held.len)
		return 0;
	clean = redact_mem(s->held.data, s->held.len);
	if (!clean)
		return AP_ENOMEM;
	s->sink(s->ud, clean, strlen(clean));
	free(clean);
	ap_buf_reset(&s->held);
	return 0;
}

void redact_stream_free(redact_stream *s)
{
	if (!s)
		return;
	redact_stream_flush(s);
	ap_buf_release(&s->held);
	free(s);
}
