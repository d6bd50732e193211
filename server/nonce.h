/* SPDX-License-Identifier: MIT */
/* server/nonce.h - one-time random values kept server-side: the `state` of the App
 * registration (one hour). (A sign-in's state is not kept here: server/signin.h binds it
 * to the browser with a signed cookie.)
 *
 * A nonce is 32 random bytes (OpenSSL's RAND_bytes) written as 64 lower-case hex digits. The
 * store holds at most its capacity of live ones; issuing past it drops the oldest, so a
 * client asking for many cannot grow memory. Each is redeemed at most once. Thread-safe (one
 * mutex); times are milliseconds passed in by the caller, so tests control the clock.
 */
#ifndef AP_NONCE_H
#define AP_NONCE_H

#include <stdint.h>

#define NONCE_HEX 64

typedef struct nonce_store nonce_store;

/* A store of at most cap (>= 1) live nonces. Free with nonce_store_free (accepts NULL). */
int nonce_store_new(nonce_store **out, int cap);
void nonce_store_free(nonce_store *s);

/* A fresh nonce of kind (a short static tag such as "setup"), valid for ttl_ms from now,
 * written to out. 0, or AP_EIO when no randomness is available. */
int nonce_issue(nonce_store *s, const char *kind, int64_t ttl_ms, int64_t now,
		char out[NONCE_HEX + 1]);

/* Redeem value (of kind): 0 when it was issued, not used and not expired; it is gone
 * afterwards. AP_ETIMEOUT when it expired (also gone), AP_ENOTFOUND when unknown, used, of
 * another kind, or malformed. The comparison is constant time. */
int nonce_redeem(nonce_store *s, const char *kind, const char *value, int64_t now);

/* Fill out with 2 * n hex digits of fresh randomness (n <= 64); out has 2 * n + 1 bytes.
 * 0 or AP_EIO. */
int nonce_random_hex(char *out, int n);

#endif
