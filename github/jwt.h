/* SPDX-License-Identifier: MIT */
/* github/jwt.h - the GitHub App's private key and its RS256 JSON Web Tokens.
 *
 * GitHub accepts a JWT with iat in the past and exp at most 10 minutes ahead; we sign
 * iat = now - 60 and exp = iat + 600 (both shifted by the clock skew the caller measured).
 */
#ifndef AP_GH_JWT_H
#define AP_GH_JWT_H

#include "common/config.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gh_key gh_key; /* an RSA private key (opaque, immutable, thread-safe) */

/* Load the App key from PRIVATE_KEY_PATH (a PEM file) or PRIVATE_KEY (the PEM itself; literal
 * "\n" sequences are turned into newlines as Probot does, and a base64-encoded PEM is accepted).
 * AP_EINVAL with a sentence saying what to fix when neither is set or the key does not parse.
 * *out is freed with gh_key_free(). */
int gh_key_load(gh_key **out, const ap_config *cfg);

/* Accepts NULL. */
void gh_key_free(gh_key *key);

/* Sign a JWT for issuer iss (the App ID or client ID) at time `now` (Unix seconds, already
 * corrected for skew): header {"alg":"RS256","typ":"JWT"}, claims iat = now - 60,
 * exp = now + 540, iss. *out is a malloc'd string the caller frees. */
int gh_jwt_sign(char **out, const gh_key *key, const char *iss, int64_t now);

#endif
