/* SPDX-License-Identifier: MIT */
/* server/signin.h - "Sign in with GitHub" on the console: the OAuth web flow with the App's
 * OAuth credentials.
 *
 *   GET /login           signin_start: a 303 to GitHub's authorize page with a fresh state
 *   GET /login/callback  signin_finish: GitHub's redirect with ?code&state; the code becomes
 *                        the user's token, the token their login, and a session is made
 *
 * The pending state is bound to the browser that started the sign-in, and nothing is kept
 * for it on the server (so no number of anonymous GET /login can push out anyone's sign-in):
 * the state (32 random bytes, 64 hex digits) goes to GitHub in the authorize URL and to the
 * browser in the cookie ap_login = "v1.EXP.STATE.MAC", where EXP is the Unix time (seconds)
 * it expires at (ten minutes on) and MAC is HMAC-SHA256(key, "v1.EXP.STATE") in lower-case
 * hex. The cookie is HttpOnly, SameSite=Lax, Path=/login, Max-Age=600, and Secure when the
 * console's URL is https. At the callback the MAC is checked first (a cookie this server did
 * not sign is refused), then EXP, then the state GitHub sent back against the cookie's;
 * the comparisons are constant time. Each refusal says which of the three failed.
 *
 * The key is derived from GITHUB_CLIENT_SECRET, which every replica of one App shares (it
 * needs it for the code exchange), so a sign-in started on one replica finishes on any:
 * key = HKDF-SHA256(IKM = the client secret, salt = SIGNIN_KEY_SALT, info = SIGNIN_KEY_INFO),
 * 32 bytes (RFC 5869). A registration that brings a new client secret changes the key:
 * sign-ins in flight then fail once and are started again.
 *
 * Whether the user sees every job (AUTOPATCH_CONSOLE_USERS: a login, or org:NAME, an
 * organization they are an active member of) is decided here, once, with their token. GitHub
 * is reached through the callbacks of signin_config.
 */
#ifndef AP_SIGNIN_H
#define AP_SIGNIN_H

#include "server/flow.h"
#include "server/session.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIGNIN_TTL_MS	  (10 * 60 * 1000)
#define SIGNIN_COOKIE	  "ap_login"
#define SIGNIN_STATE_HEX  64
#define SIGNIN_COOKIE_MAX 192 /* the value: "v1." EXP "." STATE "." MAC, NUL included */
#define SIGNIN_KEY_LEN	  32
#define SIGNIN_KEY_SALT	  "autopatch console sign-in"
#define SIGNIN_KEY_INFO	  "ap_login state cookie v1"
#define SIGNIN_ORG_MAX	  63 /* bytes of an org:NAME entry's name */

typedef struct signin signin;

typedef struct signin_config {
	const char *console_url;   /* the console as the browser reaches it, or NULL */
	const char *web_url;	   /* GITHUB_URL */
	const char *client_id;	   /* GITHUB_CLIENT_ID, or NULL (copied) */
	const char *client_secret; /* GITHUB_CLIENT_SECRET, or NULL (copied) */
	const char *operators;	   /* AUTOPATCH_CONSOLE_USERS (logins, org:NAME), or NULL */
	/* The OAuth code exchange: *token is malloc'd (caller wipes and frees). */
	int (*exchange)(void *ud, const char *client_id, const char *client_secret,
			const char *code, const char *redirect_uri, char **token);
	/* GET /user: *login is malloc'd. */
	int (*user_login)(void *ud, const char *token, char **login);
	/* Whether the token's user is an active member of the organization org. */
	int (*in_org)(void *ud, const char *token, const char *org, bool *yes);
	void *ud;
} signin_config;

/* console_url, web_url and operators are borrowed and must outlive s; the OAuth credentials
 * are copied. */
int signin_new(signin **out, const signin_config *cfg);
/* Wipes the credentials. Accepts NULL. */
void signin_free(signin *s);

/* Use these OAuth credentials from now on (after a registration); NULL or "" clears one. */
void signin_set_client(signin *s, const char *client_id, const char *client_secret);

/* GET /login: *a is a 303 to GitHub with the state cookie, or a problem (sign-in not set up). */
void signin_start(signin *s, flow_answer *a);

/* GET /login/callback with GitHub's code and state and the request's Cookie header (any may
 * be NULL). On success a session of ttl_ms is made in sessions, its id written to sid and *a
 * is a 303 to / that clears the state cookie; otherwise sid is "" and *a a problem. */
void signin_finish(signin *s, sess_store *sessions, int64_t ttl_ms, const char *code,
		   const char *state, const char *cookie_header, char sid[SESS_HEX + 1],
		   flow_answer *a);

/* The state cookie's key from client_secret (see above). 0, AP_EINVAL (none), AP_EIO. */
int signin_key(const char *client_secret, unsigned char key[SIGNIN_KEY_LEN]);

/* A fresh state and the value of its cookie, valid SIGNIN_TTL_MS from now (ms since the
 * epoch). 0, AP_EIO (no randomness), AP_EUNAVAIL (no client secret, so no key). */
int signin_cookie_make(signin *s, int64_t now, char state[SIGNIN_STATE_HEX + 1],
		       char cookie[SIGNIN_COOKIE_MAX]);

/* Whether cookie (the value of ap_login) was signed by this server, has not expired at now
 * and carries state (GitHub's ?state, may be NULL): 0, or AP_EDENIED (malformed or not
 * signed with this key), AP_ETIMEOUT (expired), AP_EINVAL (another state), AP_EUNAVAIL (no
 * key), each with a message. */
int signin_cookie_check(signin *s, const char *cookie, const char *state, int64_t now);

/* The next org:NAME entry of an AUTOPATCH_CONSOLE_USERS list at or after *cursor: true with
 * NAME in org[0..cap) and *cursor moved past the entry, false when none is left. An entry
 * whose name needs cap bytes or more is skipped. Start with *cursor = the list (may be NULL). */
bool signin_next_org(const char **cursor, char *org, size_t cap);

/* Whether login (token) may see every job under AUTOPATCH_CONSOLE_USERS; exposed for tests. */
bool signin_is_operator(signin *s, const char *login, const char *token);

#endif
