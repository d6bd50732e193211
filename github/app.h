/* SPDX-License-Identifier: MIT */
/* github/app.h - the GitHub App identity: JWTs and a thread-safe installation-token cache.
 *
 * One gh_app per process (the worker pool shares it); a registration may swap its identity
 * while it is in use (gh_app_set_identity). Tokens are minted with
 * POST /app/installations/{id}/access_tokens, kept in memory only, registered with the
 * redaction layer as soon as they arrive, and reused until AUTOPATCH_GH_TOKEN_MARGIN_S
 * (default 600) seconds before their expires_at.
 */
#ifndef AP_GH_APP_H
#define AP_GH_APP_H

#include "common/config.h"
#include "github/creds.h"

#include <stdint.h>

typedef struct gh_app gh_app;

/* Read APP_ID, the private key (PRIVATE_KEY_PATH or PRIVATE_KEY) and GITHUB_API_URL (default
 * https://api.github.com). AP_EINVAL with a sentence when a setting is missing or bad. The
 * config is borrowed and must outlive the app. *out is freed with gh_app_free(). */
int gh_app_new(gh_app **out, const ap_config *cfg);

/* The same with the identity given instead of read from cfg (a registration that happened
 * while the server ran): app_id is the App ID, pem its private key (PEM text); both copied. */
int gh_app_new_as(gh_app **out, const ap_config *cfg, const char *app_id, const char *pem);

/* Switch the App to another identity (a new registration) without stopping anyone: the next
 * JWT is signed as app_id with pem, every cached installation token (the old App's) is dropped,
 * and a token the old App was minting meanwhile is handed to its caller but not cached.
 * Thread-safe; the credentials table (gh_app_creds) stays the same pointer. On error (AP_EINVAL:
 * the key does not parse, or no app_id; AP_ENOMEM) the App is unchanged. */
int gh_app_set_identity(gh_app *app, const char *app_id, const char *pem);

/* Accepts NULL. */
void gh_app_free(gh_app *app);

/* The installation token for installation_id: the cached one while it has more than the
 * margin left, else a newly minted one. *out is a malloc'd copy the caller frees (and should
 * not keep: call again before each use, it is cheap). Thread-safe; concurrent callers for the
 * same installation wait for one mint. Errors: AP_EHTTP/AP_ENOTFOUND/AP_EDENIED with GitHub's
 * message, AP_EUNAVAIL/AP_ETIMEOUT when GitHub cannot be reached. */
int gh_app_token(gh_app *app, int64_t installation_id, char **out);

/* The credentials table the REST client authenticates with (github/creds.h): token is
 * gh_app_jwt for installation 0, else gh_app_token. Borrowed, lives as long as app. */
const gh_creds *gh_app_creds(const gh_app *app);

#endif
