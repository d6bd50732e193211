/* SPDX-License-Identifier: MIT */
/* server/form.h - the parsers of request input the console reads itself: urlencoded form
 * bodies and query strings, and the Cookie header.
 *
 * Pure functions on borrowed bytes (no allocation, no globals) so tests/fuzz/fuzz_form.c
 * drives exactly what the server runs. Every value is copied into a caller's buffer of a
 * fixed size: a value that does not fit is refused (AP_ETOOBIG), never cut, so a truncated
 * token can never match a stored one.
 */
#ifndef AP_FORM_H
#define AP_FORM_H

#include "common/buf.h"

#include <stddef.h>

/* The first value of name in an application/x-www-form-urlencoded text (a POST body or a
 * query string without its '?'): in[0..len) need not be NUL-terminated. '+' is a space and
 * %XX a byte; a malformed escape or a decoded NUL makes the value invalid (AP_EINVAL). The
 * value is written NUL-terminated to out[0..cap). Returns 0, AP_ENOTFOUND when name is not
 * there, AP_ETOOBIG when the value needs cap bytes or more, AP_EINVAL. */
int form_get(const char *in, size_t len, const char *name, char *out, size_t cap);

/* The value of cookie name in a Cookie header value ("a=1; b=2"), copied to out[0..cap) (no
 * decoding; surrounding double quotes removed). Returns 0, AP_ENOTFOUND (also when header
 * is NULL), AP_ETOOBIG, AP_EINVAL for a value with a control character, space, comma or
 * backslash. */
int form_cookie(const char *header, const char *name, char *out, size_t cap);

/* Append s to b percent-encoded for a query string (everything but A-Z a-z 0-9 - . _ ~).
 * 0, or the buffer's error (AP_ETOOBIG, AP_ENOMEM). */
int form_escape(ap_buf *b, const char *s);

#endif
