/* SPDX-License-Identifier: MIT */
/* server/session.h - the console's server-side session table.
 *
 * A session is created when a user signs in with GitHub (or, on an admin listener that needs
 * no sign-in, on the operator's first visit, so the cancel and retry buttons still carry a
 * CSRF token bound to something the browser alone holds). The browser keeps only the
 * session id, in an HttpOnly, Secure, SameSite=Lax cookie; everything else stays here: the
 * login, whether it is the operator (sees every job), the user's GitHub token (memory only,
 * wiped when the session ends), the CSRF token and a short cache of which repositories the
 * user may push to.
 *
 * Ids and CSRF tokens are 32 random bytes as 64 hex digits, compared in constant time. The
 * table holds at most its capacity; a new session past it replaces the one closest to
 * expiry. One login holds at most SESS_PER_LOGIN signed-in sessions (with a token): its next
 * replaces its own oldest, so anyone with a GitHub account, signing in again and again,
 * cannot push out other users' sessions. Thread-safe (one mutex); times are milliseconds passed in
 * by the caller.
 */
#ifndef AP_SESSION_H
#define AP_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#define SESS_HEX       64
#define SESS_LOGIN_MAX 64
#define SESS_REPO_MAX  256
#define SESS_PER_LOGIN 8
/* How long a "may push to this repository" answer is believed. */
#define SESS_PERM_TTL_MS (5 * 60 * 1000)

typedef struct sess_store sess_store;

/* A copy of what a page needs to know about its session. */
typedef struct sess_info {
	char login[SESS_LOGIN_MAX + 1];
	char csrf[SESS_HEX + 1];
	bool operator; /* sees every job (loopback operator or AUTOPATCH_CONSOLE_USERS) */
	int64_t expires;
} sess_info;

int sess_store_new(sess_store **out, int cap);
/* Wipes every token. Accepts NULL. */
void sess_store_free(sess_store *s);

/* A new session for login (at most SESS_LOGIN_MAX bytes) valid for ttl_ms; token (the user's
 * GitHub token, may be NULL) is copied. The id goes to id. 0, AP_EINVAL, AP_EIO (no
 * randomness), AP_ENOMEM. */
int sess_create(sess_store *s, const char *login, const char *token, bool operator, int64_t ttl_ms,
		int64_t now, char id[SESS_HEX + 1]);

/* The live session id: 0 and *out filled, or AP_ENOTFOUND (unknown, malformed or expired; an
 * expired one is dropped). */
int sess_get(sess_store *s, const char *id, int64_t now, sess_info *out);

/* Whether csrf is the CSRF token of the live session id. */
bool sess_csrf_ok(sess_store *s, const char *id, const char *csrf, int64_t now);

/* A malloc'd copy of the session's GitHub token (caller wipes and frees); AP_ENOTFOUND when
 * the session is gone or has none. */
int sess_token(sess_store *s, const char *id, int64_t now, char **out);

/* The cached answer for repo: 0 with *yes, or AP_ENOTFOUND when none is cached or it is
 * older than SESS_PERM_TTL_MS. */
int sess_perm_get(sess_store *s, const char *id, const char *repo, int64_t now, bool *yes);
/* Remember the answer for repo (the oldest cached answer makes room). */
void sess_perm_put(sess_store *s, const char *id, const char *repo, bool yes, int64_t now);

/* End the session (sign-out). Unknown ids are ignored. */
void sess_end(sess_store *s, const char *id);

#endif
