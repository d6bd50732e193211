/* SPDX-License-Identifier: MIT */
/* common/httpc.h - what every libcurl user shares: the one process-wide curl_global_init,
 * the capped response-body sink and the capped response-header collector.
 *
 * Each caller keeps its own easy handle, options and error messages; this module owns only
 * the parts that were the same everywhere. Thread-safe: the init runs once per process, and
 * a sink or collector belongs to one transfer at a time.
 */
#ifndef AP_HTTPC_H
#define AP_HTTPC_H

#include "common/buf.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* curl_global_init(CURL_GLOBAL_DEFAULT) once per process (pthread_once); every later call
 * returns the first result. Call it before curl_easy_init(). 0, or AP_EIO "libcurl failed
 * to initialise". There is no matching cleanup: libcurl stays initialised until exit. */
int httpc_global_init(void);

/* Where one transfer's body goes. */
typedef struct httpc_body {
	ap_buf *buf; /* the body, capped by buf->cap (borrowed); NULL: read and drop it */
	int rc;	     /* 0, or why the transfer was aborted: AP_ETOOBIG (over buf->cap), AP_ENOMEM */
} httpc_body;

#define HTTPC_BODY_INIT(bufp)                                                                      \
	{                                                                                          \
		(bufp), 0                                                                          \
	}

/* Set CURLOPT_WRITEFUNCTION and CURLOPT_WRITEDATA of h so the body goes to *b, which must
 * outlive the transfer. Once the body would pass b->buf's cap the transfer is aborted
 * (curl_easy_perform() returns CURLE_WRITE_ERROR) and b->rc says AP_ETOOBIG; what arrived
 * before stays in b->buf. */
void httpc_body_sink(CURL *h, httpc_body *b);

/* The CURLOPT_WRITEFUNCTION behind httpc_body_sink(); ud is an httpc_body. Exposed for
 * tests. Returns size * n, or 0 to abort the transfer. */
size_t httpc_on_body(char *p, size_t size, size_t n, void *ud);

#define HTTPC_HEADERS_MAX 16

/* The response headers a caller acts on: for each name asked for, the first value of the
 * last response (a new status line, after a redirect or a 100 Continue, starts again). */
typedef struct httpc_headers {
	const char *const *names;	 /* header names, matched without case (borrowed) */
	size_t n_names;			 /* at most HTTPC_HEADERS_MAX */
	size_t value_cap;		 /* a longer value is cut to this many bytes */
	char *values[HTTPC_HEADERS_MAX]; /* NULL, or names[i]'s value, trimmed (owned) */
} httpc_headers;

/* Collect the headers names[0..n) (n <= HTTPC_HEADERS_MAX; names is borrowed and must
 * outlive h), each value cut to value_cap bytes. Cannot fail. */
void httpc_headers_init(httpc_headers *h, const char *const *names, size_t n, size_t value_cap);

/* Set CURLOPT_HEADERFUNCTION and CURLOPT_HEADERDATA of c so the headers go to *h, which
 * must outlive the transfer. A value that cannot be copied (no memory) reads as absent. */
void httpc_headers_sink(CURL *c, httpc_headers *h);

/* The CURLOPT_HEADERFUNCTION behind httpc_headers_sink(); ud is an httpc_headers. Exposed
 * for tests. Always returns size * n. */
size_t httpc_on_header(char *p, size_t size, size_t n, void *ud);

/* The value collected for name (one of the names asked for), or NULL when the response had
 * none. Borrowed from h: valid until the next transfer or httpc_headers_clear(). */
const char *httpc_header(const httpc_headers *h, const char *name);

/* Free the collected values and forget them; h may collect again. Accepts NULL. */
void httpc_headers_clear(httpc_headers *h);

/* Longest delay httpc_retry_after_seconds() gives (about 31 years): ms of it fit int64_t. */
#define HTTPC_RETRY_AFTER_MAX 1000000000LL

/* A Retry-After value in its delay-seconds form (a non-negative integer, blanks around it
 * allowed): true with *seconds (at most HTTPC_RETRY_AFTER_MAX). False for NULL, an HTTP-date
 * or anything else; what a date means is the caller's choice. The one reader of the header's
 * number for GitHub (github/rest.c) and the model servers (agents/llm.c). */
bool httpc_retry_after_seconds(const char *value, long long *seconds);

#endif
