/* SPDX-License-Identifier: MIT */
/* common/redact.h - the one redaction layer for everything that leaves the server.
 *
 * Logs, comments, PR bodies, trajectories, model context and error messages pass through here.
 * Registered secrets are masked in their plain, base64 (all three alignments), URL-encoded and
 * JSON-escaped forms; token patterns (GitHub, OpenAI, Anthropic, AWS) and PEM private-key
 * blocks are masked even when never registered. Every match becomes "***".
 *
 * The registry is process-wide and thread-safe. Values shorter than 6 bytes are not
 * registered (they would mask ordinary words).
 */
#ifndef AP_REDACT_H
#define AP_REDACT_H

#include <stddef.h>

#include "buf.h"

#define REDACT_MASK "***"

/* Register a secret value (copied). Returns 0, or AP_ENOMEM. Registering twice is harmless. */
int redact_add_secret(const char *value);

/* Forget every registered secret (tests, config reload). */
void redact_clear(void);

/* Return a newly allocated, redacted copy of in[0..len) (caller frees), NULL on ENOMEM. */
char *redact_mem(const char *in, size_t len);

/* redact_mem() for a C string. */
char *redact_str(const char *in);

/* Redact in place into an ap_buf: replaces b's contents with the redacted text. */
int redact_buf(ap_buf *b);

/*
 * Streaming redaction for output that arrives in pieces (a log line written in two calls, a
 * container's output): text is held back just long enough that a secret split across two
 * writes is still caught. `sink` receives redacted bytes, in order.
 */
typedef struct redact_stream redact_stream;
typedef void (*redact_sink_fn)(void *ud, const char *p, size_t n);

int redact_stream_new(redact_stream **out, redact_sink_fn sink, void *ud);
int redact_stream_write(redact_stream *s, const char *p, size_t n);
/* Emit everything held back. */
int redact_stream_flush(redact_stream *s);
/* Flushes, then frees. Accepts NULL. */
void redact_stream_free(redact_stream *s);

#endif
