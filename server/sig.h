/* SPDX-License-Identifier: MIT */
/* server/sig.h - X-Hub-Signature-256: HMAC-SHA256 over the raw request body.
 *
 * GitHub signs the exact bytes it sends with the webhook secret and puts
 * "sha256=" + 64 lower-case hex digits in the header. We verify the raw bytes (never
 * re-serialised JSON), decode the hex first and compare the 32 bytes in constant time.
 */
#ifndef AP_SIG_H
#define AP_SIG_H

#include <stddef.h>

/* Length of a signature header value plus its NUL: "sha256=" + 64 hex + NUL. */
#define SIG_HEADER_LEN 72

/* 0 when header is a valid signature of body[0..len) under secret, AP_EDENIED otherwise
 * (missing secret or header, wrong prefix, wrong length, non-hex or upper-case hex digits,
 * mismatch). Never sets a message that contains the secret. */
int sig_verify(const char *secret, const void *body, size_t len, const char *header);

/* For tests only (and the fuzzer): write the header value for body under secret into out
 * (SIG_HEADER_LEN bytes). Returns 0 or AP_EINVAL. */
int sig__sign(const char *secret, const void *body, size_t len, char out[SIG_HEADER_LEN]);

#endif
