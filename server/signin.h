/* SPDX-License-Identifier: MIT */
/* server/signin.h - "Sign in with GitHub" on the console: the OAuth web flow with the App's
 * OAuth credentials.
 *
 *   GET /login           signin_start: a 303 to GitHub's authorize page with a fresh state
 *   GET /login/callback  signin_finish: GitHub's redirect with ?code&state; the code becomes
 *                        the user's token, the token their login, and a session is made
 *
 * The state must be one this server issued and the one this browser was given (a cookie
 * limited to Path=/login). Whether the user sees every job (AUTOPATCH_CONSOLE_USERS: a login
 * or org:NAME, an organization they are an active member of) is decided here, once, with
 * their token. GitHub is reached through the callbacks of signin_config.
 */
#ifndef AP_SIGNIN_H
#define AP_SIGNIN_H

#include <stdbool.h>
#include <stdint.h>

#include "server/flow.h"
#include "server/session.h"

#define SIGNIN_TTL_MS	  (10 * 60 * 1000)
#define SIGNIN_STATES_MAX 256
#define SIGNIN_COOKIE	  "ap_login"

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

/* Whether login (token) may see every job under AUTOPATCH_CONSOLE_USERS; exposed for tests. */
bool signin_is_operator(signin *s, const char *login, const char *token);

#endif
