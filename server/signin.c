/* SPDX-License-Identifier: MIT */
/* server/signin.c - "Sign in with GitHub" on the console, the OAuth web flow (signin.h). */
#include "server/signin.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/form.h"
#include "server/nonce.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct signin {
	signin_config cfg;
	nonce_store *states;
	pthread_mutex_t lock; /* client_id and client_secret (a registration replaces them) */
	char *client_id, *client_secret;
};

static void wipe_free(char *s)
{
	if (s)
		OPENSSL_cleanse(s, strlen(s));
	free(s);
}

static void replace(pthread_mutex_t *lock, char **slot, const char *value)
{
	char *copy = value && *value ? strdup(value) : NULL;

	pthread_mutex_lock(lock);
	wipe_free(*slot);
	*slot = copy;
	pthread_mutex_unlock(lock);
}

int signin_new(signin **out, const signin_config *cfg)
{
	signin *s;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ap_error_set(AP_ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->cfg.client_id = s->cfg.client_secret = NULL;
	pthread_mutex_init(&s->lock, NULL);
	signin_set_client(s, cfg->client_id, cfg->client_secret);
	if ((rc = nonce_store_new(&s->states, SIGNIN_STATES_MAX))) {
		signin_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void signin_free(signin *s)
{
	if (!s)
		return;
	nonce_store_free(s->states);
	signin_set_client(s, NULL, NULL);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void signin_set_client(signin *s, const char *client_id, const char *client_secret)
{
	replace(&s->lock, &s->client_id, client_id);
	replace(&s->lock, &s->client_secret, client_secret);
}

/* Copies of the OAuth credentials (caller frees both); false when sign-in is not set up. */
static bool oauth_creds(signin *s, char **id, char **secret)
{
	pthread_mutex_lock(&s->lock);
	*id = s->client_id ? strdup(s->client_id) : NULL;
	*secret = s->client_secret ? strdup(s->client_secret) : NULL;
	pthread_mutex_unlock(&s->lock);
	if (*id && *secret)
		return true;
	free(*id);
	wipe_free(*secret);
	*id = *secret = NULL;
	return false;
}

static bool listed(const char *list, const char *login)
{
	size_t n = strlen(login);

	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len;

		while (*p == ' ')
			p++;
		len = end ? (size_t)(end - p) : strlen(p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len == n && strncasecmp(p, login, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

/* A question GitHub does not answer counts as "no" and is logged. */
bool signin_is_operator(signin *s, const char *login, const char *token)
{
	const char *list = s->cfg.operators;

	if (listed(list, login))
		return true;
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		char org[64];
		size_t len;
		bool yes = false;

		while (*p == ' ')
			p++;
		len = end ? (size_t)(end - p) : strlen(p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len > 4 && len - 4 < sizeof(org) && strncasecmp(p, "org:", 4) == 0) {
			memcpy(org, p + 4, len - 4);
			org[len - 4] = '\0';
			if (s->cfg.in_org(s->cfg.ud, token, org, &yes) != 0)
				ap_warn("console: cannot ask GitHub whether %s belongs to %s: %s",
					login, org, ap_error_last());
			else if (yes)
				return true;
		}
		p = end ? end + 1 : NULL;
	}
	return false;
}

void signin_start(signin *s, flow_answer *a)
{
	char state[NONCE_HEX + 1], *id = NULL, *secret = NULL;
	ap_buf where = AP_BUF_INIT(FLOW_URL_MAX);

	if (!s->cfg.console_url || !oauth_creds(s, &id, &secret)) {
		flow_problem(
		    a, 503, "Sign-in is not set up",
		    "The console has no OAuth credentials of the App (or no URL of its own).",
		    "set GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET and AUTOPATCH_CONSOLE_URL (the "
		    "registration at /setup writes the first two)");
		return;
	}
	if (nonce_issue(s->states, "login", SIGNIN_TTL_MS, ap_wall_ms(), state) ||
	    ap_buf_addf(&where, "%s/login/oauth/authorize?client_id=", s->cfg.web_url) ||
	    form_escape(&where, id) || ap_buf_adds(&where, "&redirect_uri=") ||
	    form_escape(&where, s->cfg.console_url) || ap_buf_adds(&where, "%2Flogin%2Fcallback") ||
	    ap_buf_addf(&where, "&state=%s", state)) {
		flow_problem(a, 500, "Cannot start the sign-in", ap_error_last(), "try again");
	} else if (flow_redirect(a, ap_buf_str(&where)) == 0) {
		flow_cookie(a,
			    SIGNIN_COOKIE "=%s; Path=/login; Max-Age=600; HttpOnly; Secure; "
					  "SameSite=Lax",
			    state);
	}
	ap_buf_release(&where);
	free(id);
	wipe_free(secret);
}

/* The state must be one we issued AND the one this browser was given. */
static bool state_ok(signin *s, const char *state, const char *cookie_header)
{
	char cookie[NONCE_HEX + 1];

	return state && form_cookie(cookie_header, SIGNIN_COOKIE, cookie, sizeof(cookie)) == 0 &&
	       strlen(cookie) == strlen(state) &&
	       CRYPTO_memcmp(cookie, state, strlen(state)) == 0 &&
	       nonce_redeem(s->states, "login", state, ap_wall_ms()) == 0;
}

void signin_finish(signin *s, sess_store *sessions, int64_t ttl_ms, const char *code,
		   const char *state, const char *cookie_header, char sid[SESS_HEX + 1],
		   flow_answer *a)
{
	char cb[FLOW_URL_MAX];
	char *id = NULL, *secret = NULL, *token = NULL, *login = NULL;
	int rc;

	sid[0] = '\0';
	if (!state_ok(s, state, cookie_header)) {
		flow_problem(
		    a, 400, "Sign-in refused",
		    "This answer does not carry the state this browser was given, or it expired.",
		    "sign in again from /login");
		return;
	}
	if (!code || !s->cfg.console_url || !oauth_creds(s, &id, &secret)) {
		flow_problem(a, 400, "Sign-in incomplete",
			     "GitHub sent no code, or sign-in is not set up.",
			     "sign in again from /login");
		return;
	}
	snprintf(cb, sizeof(cb), "%s/login/callback", s->cfg.console_url);
	if ((rc = s->cfg.exchange(s->cfg.ud, id, secret, code, cb, &token)) ||
	    (rc = s->cfg.user_login(s->cfg.ud, token, &login)) ||
	    (rc = sess_create(sessions, login, token, signin_is_operator(s, login, token), ttl_ms,
			      ap_wall_ms(), sid))) {
		sid[0] = '\0';
		flow_problem(a, rc == AP_EDENIED ? 403 : 502, "Sign-in failed", ap_error_last(),
			     "sign in again from /login; if it keeps failing, check GITHUB_URL and "
			     "the App's client id and secret");
		goto out;
	}
	ap_info("console: %s signed in", login);
	flow_redirect(a, "/");
	flow_cookie(a, SIGNIN_COOKIE "=; Path=/login; Max-Age=0; HttpOnly; Secure; SameSite=Lax");
out:
	wipe_free(token);
	free(login);
	free(id);
	wipe_free(secret);
}
