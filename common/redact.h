/* SPDX-License-Identifier: MIT */
/* common/redact.h - the one redaction layer for everything that leaves the server.
 *
 * Logs, comments, PR bodies, trajectories, model context and error messages pass through here.
 * Registered secrets are masked in their plain, base64 (all three alignments, standard and
 * URL-safe alphabets), URL-encoded (%XX in both cases, '+' for space) and JSON-escaped (once and
 * twice) forms; a multi-line value (a PEM key) is also registered line by line and in its
 * literal-"\n" spelling, and a value written with literal "\n" also with real newlines. Token
 * patterns are masked even when never registered: GitHub (ghp_/gho_/ghu_/ghs_/ghr_ + 36,
 * github_pat_ + 82), OpenAI (sk-...T3BlbkFJ..., sk-proj-/svcacct-/admin-), Anthropic (sk-ant-),
 * AWS access key ids (AKIA/ASIA/ABIA/ACCA + 16) and "-----BEGIN ... PRIVATE KEY-----" blocks up
 * to their END line, or to the end of the text when there is none. Overlapping matches merge;
 * every merged match becomes "***".
 *
 * The registry is process-wide and thread-safe (a read-write lock: redaction runs in
 * parallel). Values shorter than 6 bytes are not registered (they would mask ordinary words).
 */
#ifndef AP_REDACT_H
#define AP_REDACT_H

#include "common/buf.h"

#include <stddef.h>

#define REDACT_MASK "***"

/* Register a secret value (copied). Returns 0, or AP_ENOMEM. Registrations are counted:
 * registering twice is harmless and takes two redact_remove_secret() calls to undo. */
int redact_add_secret(const char *value);

/* Take back one redact_add_secret() of the same value (an expired installation token), so a
 * long-running server's registry does not grow without bound. Variants another registered
 * secret also produced stay. Returns 0, or AP_ENOMEM (the value may then stay partly
 * registered, which only masks more). */
int redact_remove_secret(const char *value);

/* For tests only: forget every registered secret. */
void redact__clear(void);

/* For tests only: how many literal variants are registered. */
size_t redact__variant_count(void);

/* Append the redacted form of in[0..len) to out; binary-safe (in may hold NUL bytes).
 * Returns 0, AP_ETOOBIG if out's cap is hit, AP_ENOMEM. On failure out may hold a redacted
 * prefix of the text, never an unredacted byte. */
int redact_append(ap_buf *out, const char *in, size_t len);

/* Return a newly allocated, redacted copy of in[0..len) (caller frees), NULL on ENOMEM. */
char *redact_mem(const char *in, size_t len);

/* redact_mem() for a C string. */
char *redact_str(const char *in);

/*
 * Streaming redaction for output that arrives in pieces (a log line written in two calls, a
 * container's output): the concatenated output equals redact_mem() of the concatenated input,
 * except that a private-key block left open past 64 KiB is masked early and its body skipped,
 * and an AWS key id right after an emitted letter or digit is masked (the stream no longer
 * sees that character; redact_mem() requires a non-alphanumeric one before the key).
 * Never emitted: a prefix of a possible match. The stream holds back a tail as long as the
 * longest registered variant, any unfinished token, and batches 4 KiB beyond that before
 * rescanning. `sink` receives redacted bytes, in order, from inside write/flush calls but
 * without the registry lock held (it may log or register secrets). One stream is used by one
 * thread at a time.
 */
typedef struct redact_stream redact_stream;
typedef void (*redact_sink_fn)(void *ud, const char *p, size_t n);

int redact_stream_new(redact_stream **out, redact_sink_fn sink, void *ud);
int redact_stream_write(redact_stream *s, const char *p, size_t n);
/* Bytes gathered beyond the hold-back before a rescan (default 4096; 0 = emit as early as
 * possible, e.g. for interactive output or tests). */
void redact_stream_set_batch(redact_stream *s, size_t bytes);
/* Emit everything held back. */
int redact_stream_flush(redact_stream *s);
/* Flushes, then frees. Accepts NULL. */
void redact_stream_free(redact_stream *s);

#endif
