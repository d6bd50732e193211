/* SPDX-License-Identifier: MIT */
/* common/buf.h - a growable byte buffer with a hard size cap (after curl's dynbuf).
 *
 * Every buffer that holds outside data is an ap_buf with a cap. Invariant: `data` is either
 * NULL (nothing appended yet) or NUL-terminated at data[len], so text can be used as a C
 * string. The caller owns the struct; ap_buf_release() frees the contents.
 */
#ifndef AP_BUF_H
#define AP_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ap_buf {
	char *data;   /* NULL or NUL-terminated contents */
	size_t len;   /* bytes used, excluding the terminating NUL */
	size_t alloc; /* bytes allocated */
	size_t cap;   /* hard maximum for len */
} ap_buf;

#define AP_BUF_INIT(capbytes)                                                                      \
	{                                                                                          \
		NULL, 0, 0, (capbytes)                                                             \
	}

/* Initialise an empty buffer that will never hold more than cap bytes. Cannot fail. */
void ap_buf_init(ap_buf *b, size_t cap);

/* Append n bytes. AP_ETOOBIG if len+n would pass the cap (nothing appended), AP_ENOMEM on
 * allocation failure. */
int ap_buf_add(ap_buf *b, const void *p, size_t n);

/* Append a C string. */
int ap_buf_adds(ap_buf *b, const char *s);

/* Append printf-formatted text. */
int ap_buf_addf(ap_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ap_buf_vaddf(ap_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Empty the buffer, keeping its allocation. */
void ap_buf_reset(ap_buf *b);

/* Return the contents (never NULL: "" when empty) and hand ownership to the caller, who frees
 * it with free(). The buffer is left empty and reusable. NULL only on allocation failure. */
char *ap_buf_take(ap_buf *b);

/* The contents as a C string, "" when empty. Valid until the next change to b. */
const char *ap_buf_str(const ap_buf *b);

/* How many of the n bytes at s to keep so that at most max remain without cutting a UTF-8
 * sequence in two (n itself when n <= max). */
size_t ap_utf8_prefix(const char *s, size_t n, size_t max);

/* Free the contents; b may be reused after ap_buf_init(). Accepts NULL. */
void ap_buf_release(ap_buf *b);

/* The length of s cut to at most max bytes without splitting a UTF-8 sequence. */
size_t ap_utf8_cut(const char *s, size_t max);

#endif
