/* SPDX-License-Identifier: MIT */
/* common/buf.h - a growable byte buffer with a hard size cap (after curl's dynbuf).
 *
 * Every buffer that holds outside data is an ap_buf with a cap. Invariants: `data` is either
 * NULL (nothing appended yet; then len and alloc are 0) or NUL-terminated at data[len] with
 * len < alloc, so text can be used as a C string; len <= cap. Debug builds assert them on
 * entry to and exit from every function here that changes a buffer. The caller owns the
 * struct; ap_buf_release() frees the contents, and only these functions change its fields.
 */
#ifndef AP_BUF_H
#define AP_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* snprintf into a fixed buffer that fails instead of truncating: 0, or AP_ETOOBIG ("... would
 * be cut at N bytes"; dst then holds the cut text) / AP_EINVAL for a bad format. For paths and
 * messages built from outside data, where a cut path names another file and a cut message
 * says something else. */
int ap_fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Copy s into dst[0..cap) (cap >= 4): whole when it fits, else its longest prefix that leaves
 * room for "..." without cutting a UTF-8 sequence, then "...", so the cut shows. For text from
 * outside that is only shown (a denial's command, a server's message), where failing would
 * lose what there is to show; paths and names use ap_fmt(). True when s was cut. */
bool ap_excerpt(char *dst, size_t cap, const char *s);

/* Empty the buffer, keeping its allocation. */
void ap_buf_reset(ap_buf *b);

/* Cut the contents to their first len bytes (len <= b->len), keeping the allocation and the
 * NUL at data[len]. The one way to shorten a buffer: never assign b->len yourself. */
void ap_buf_truncate(ap_buf *b, size_t len);

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

/* ---- UTF-8 text from outside -----------------------------------------------------------------
 *
 * Bytes from a box, a repository or a model server are not text until checked: JSON (the
 * trajectory, model requests, events) must be valid UTF-8, and a C string ends at a NUL. These
 * functions are the one decoder and the one cleaner for such bytes; cJSON passes invalid
 * bytes through as given, so text is cleaned before it is printed as JSON. */

/* U+FFFD REPLACEMENT CHARACTER, in UTF-8. */
#define AP_UTF8_REPLACEMENT "\xef\xbf\xbd"

/* Decode the sequence at s[0..n) (n >= 1): the code point, with *used = its length. What is not
 * a valid sequence (a stray continuation byte, a lead byte without its continuations, an
 * overlong form, a surrogate, a code point past U+10FFFF) is U+FFFD with *used = 1: one
 * replacement per such byte, and never a byte that could start the next character. A NUL is
 * code point 0. */
uint32_t ap_utf8_decode(const char *s, size_t n, size_t *used);

/* Write the code point c (at most U+10FFFF, not a surrogate) to out as UTF-8; its length. */
size_t ap_utf8_encode(char out[4], uint32_t c);

/* How ap_utf8_clean() writes what is not text. */
enum ap_utf8_mode {
	/* Every invalid byte and every NUL becomes U+FFFD. For text that is read. */
	AP_UTF8_REPLACE,
	/* Every invalid byte and every NUL becomes U+FFFD followed by the byte in two lower-case
	 * hex digits ("\xff" -> U+FFFD "ff"), and a U+FFFD of the input is followed by '~'. Two
	 * different inputs never give the same text, so names that are compared (test ids) stay
	 * as distinct as they were. Valid text without U+FFFD is left as it is. */
	AP_UTF8_DISTINCT
};

/* Write s[0..n) cleaned to out[0..max): valid UTF-8 without NUL bytes, valid characters kept
 * as they are. Only whole characters (and whole replacements) are written: it stops before the
 * first one that does not fit. Returns the bytes written (no terminating NUL is added); *used
 * (may be NULL) receives how many bytes of s were consumed, n when everything fit. out may be
 * NULL to only count (max is then ignored). Cannot fail; the result is at most 5 * n bytes. */
size_t ap_utf8_clean(char *out, size_t max, const char *s, size_t n, enum ap_utf8_mode mode,
		     size_t *used);

/* Whether s[0..n) is valid UTF-8 without NUL bytes (AP_UTF8_REPLACE would change nothing). */
bool ap_utf8_valid(const char *s, size_t n);

/* s[0..n) cleaned with AP_UTF8_REPLACE into a new NUL-terminated string (caller frees), NULL on
 * ENOMEM. */
char *ap_utf8_clean_dup(const char *s, size_t n);

#endif
