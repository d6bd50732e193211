/* SPDX-License-Identifier: MIT */
/* common/httpc.c - libcurl init once, capped body sink, capped header collector (see
 * httpc.h). */
#include "common/httpc.h"

#include "common/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_rc;

static void init_curl(void)
{
	init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int httpc_global_init(void)
{
	pthread_once(&init_once, init_curl);
	if (init_rc != CURLE_OK)
		return ap_error_set(AP_EIO, "libcurl failed to initialise: %s",
				    curl_easy_strerror(init_rc));
	return 0;
}

size_t httpc_on_body(char *p, size_t size, size_t n, void *ud)
{
	httpc_body *b = ud;
	size_t len = size * n;

	if (!b->buf)
		return len;
	if (b->rc)
		return 0;
	b->rc = ap_buf_add(b->buf, p, len);
	return b->rc ? 0 : len;
}

void httpc_body_sink(CURL *h, httpc_body *b)
{
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, httpc_on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
}

void httpc_headers_init(httpc_headers *h, const char *const *names, size_t n, size_t value_cap)
{
	memset(h, 0, sizeof(*h));
	h->names = names;
	h->n_names = n < HTTPC_HEADERS_MAX ? n : HTTPC_HEADERS_MAX;
	h->value_cap = value_cap;
}

void httpc_headers_clear(httpc_headers *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n_names; i++) {
		free(h->values[i]);
		h->values[i] = NULL;
	}
}

size_t httpc_on_header(char *p, size_t size, size_t n, void *ud)
{
	httpc_headers *h = ud;
	size_t len = size * n, nlen, vlen;
	const char *colon, *v;

	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		httpc_headers_clear(h);
		return len;
	}
	colon = memchr(p, ':', len);
	if (!colon)
		return len;
	nlen = (size_t)(colon - p);
	for (size_t i = 0; i < h->n_names; i++) {
		if (h->values[i] || strlen(h->names[i]) != nlen ||
		    strncasecmp(h->names[i], p, nlen) != 0)
			continue;
		v = colon + 1;
		vlen = len - nlen - 1;
		while (vlen && (*v == ' ' || *v == '\t')) {
			v++;
			vlen--;
		}
		while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' ' ||
				v[vlen - 1] == '\t'))
			vlen--;
		h->values[i] = strndup(v, vlen < h->value_cap ? vlen : h->value_cap);
		break;
	}
	return len;
}

void httpc_headers_sink(CURL *c, httpc_headers *h)
{
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, httpc_on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
}

const char *httpc_header(const httpc_headers *h, const char *name)
{
	for (size_t i = 0; i < h->n_names; i++)
		if (strcasecmp(h->names[i], name) == 0)
			return h->values[i];
	return NULL;
}

bool httpc_retry_after_seconds(const char *value, long long *seconds)
{
	char *end;
	long long v;

	if (!value)
		return false;
	errno = 0;
	v = strtoll(value, &end, 10);
	while (*end == ' ' || *end == '\t')
		end++;
	if (end == value || *end || v < 0)
		return false;
	*seconds = errno == ERANGE || v > HTTPC_RETRY_AFTER_MAX ? HTTPC_RETRY_AFTER_MAX : v;
	return true;
}
