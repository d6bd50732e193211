/* SPDX-License-Identifier: MIT */
/* server/signin.c - "Sign in with GitHub" on the console, the OAuth web flow (signin.h). */
#include "server/signin.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/form.h"
#include "server/nonce.h" /* nonce_random_hex */

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KEY_LEN	   32
#define MAC_HEX	   64
#define EXP_DIGITS 19

struct signin {
	signin_config cfg;
	bool secure;	      /* the console's URL is https: the state cookie is Secure */
	pthread_mutex_t lock; /* the credentials and the key (a registration replaces them) */
	char *client_id, *client_secret;
	unsigned char key[KEY_LEN]; /* the state cookie's key, from the client secret */
	bool keyed;
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

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ap_error_set(AP_ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->cfg.client_id = s->cfg.client_secret = NULL;
	s->secure = cfg->console_url && strncasecmp(cfg->console_url, "https://", 8) == 0;
	pthread_mutex_init(&s->lock, NULL);
	signin_set_client(s, cfg->client_id, cfg->client_secret);
	*out = s;
	return 0;
}

void signin_free(signin *s)
{
	if (!s)
		return;
	signin_set_client(s, NULL, NULL);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int signin_key(const char *client_secret, unsigned char key[SIGNIN_KEY_LEN])
{
	static const char salt[] = SIGNIN_KEY_SALT, info[] = SIGNIN_KEY_INFO "\x01";
	unsigned char prk[KEY_LEN];
	unsigned int n = 0;
	bool ok;

	if (!client_secret || !*client_secret)
		return ap_error_set(AP_EINVAL, "no client secret to derive the sign-in key from");
	/* HKDF-SHA256 (RFC 5869): extract with the salt, then one block of expand. */
	ok = HMAC(EVP_sha256(), salt, (int)strlen(salt), (const unsigned char *)client_secret,
		  strlen(client_secret), prk, &n) &&
	     n == KEY_LEN &&
	     HMAC(EVP_sha256(), prk, KEY_LEN, (const unsigned char *)info, strlen(info), key, &n) &&
	     n == KEY_LEN;
	OPENSSL_cleanse(prk, sizeof(prk));
	if (!ok)
		return ap_error_set(AP_EIO, "HMAC-SHA256 failed");
	return 0;
}

void signin_set_client(signin *s, const char *client_id, const char *client_secret)
{
	unsigned char key[KEY_LEN];
	/* No secret is no key, not an error (that would linger as the thread's last message). */
	bool keyed = client_secret && *client_secret && signin_key(client_secret, key) == 0;

	replace(&s->lock, &s->client_id, client_id);
	replace(&s->lock, &s->client_secret, client_secret);
	pthread_mutex_lock(&s->lock);
	memcpy(s->key, key, KEY_LEN);
	s->keyed = keyed;
	pthread_mutex_unlock(&s->lock);
	OPENSSL_cleanse(key, sizeof(key));
}

/* The MAC of "v1.EXP.STATE" as lower-case hex; false without a key. */
static bool cookie_mac(signin *s, const char *exp, const char *state, char out[MAC_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char key[KEY_LEN], mac[KEY_LEN];
	char msg[8 + EXP_DIGITS + SIGNIN_STATE_HEX];
	unsigned int n = 0;
	bool keyed, ok;

	pthread_mutex_lock(&s->lock);
	keyed = s->keyed;
	memcpy(key, s->key, KEY_LEN);
	pthread_mutex_unlock(&s->lock);
	/* Fits: exp is at most EXP_DIGITS digits, state SIGNIN_STATE_HEX hex (both checked). */
	snprintf(msg, sizeof(msg), "v1.%s.%s", exp, state);
	ok = keyed &&
	     HMAC(EVP_sha256(), key, KEY_LEN, (const unsigned char *)msg, strlen(msg), mac, &n) &&
	     n == KEY_LEN;
	OPENSSL_cleanse(key, sizeof(key));
	for (int i = 0; ok && i < KEY_LEN; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[ok ? MAC_HEX : 0] = '\0';
	return ok;
}

int signin_cookie_make(signin *s, int64_t now, char state[SIGNIN_STATE_HEX + 1],
		       char cookie[SIGNIN_COOKIE_MAX])
{
	char exp[EXP_DIGITS + 1], mac[MAC_HEX + 1];
	int rc;

	if ((rc = nonce_random_hex(state, SIGNIN_STATE_HEX / 2)))
		return rc;
	snprintf(exp, sizeof(exp), "%lld", (long long)((now + SIGNIN_TTL_MS) / 1000));
	if (!cookie_mac(s, exp, state, mac))
		return ap_error_set(AP_EUNAVAIL, "sign-in has no key (no client secret)");
	/* Fits: 3 + 19 + 1 + 64 + 1 + 64 bytes < SIGNIN_COOKIE_MAX. */
	snprintf(cookie, SIGNIN_COOKIE_MAX, "v1.%s.%s.%s", exp, state, mac);
	return 0;
}

static bool all_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

int signin_cookie_check(signin *s, const char *cookie, const char *state, int64_t now)
{
	char exp[EXP_DIGITS + 1], want[MAC_HEX + 1], mine[SIGNIN_STATE_HEX + 1];
	const char *p = cookie, *dot;
	size_t n;

	/* v1.EXP.STATE.MAC: the parts' shapes first, then the MAC, then time, then state. */
	if (!p || strncmp(p, "v1.", 3) != 0)
		return ap_error_set(AP_EDENIED, "not a sign-in cookie of this server");
	p += 3;
	dot = strchr(p, '.');
	n = dot ? (size_t)(dot - p) : 0;
	if (!n || n > EXP_DIGITS || strspn(p, "0123456789") != n)
		return ap_error_set(AP_EDENIED, "not a sign-in cookie of this server");
	memcpy(exp, p, n);
	exp[n] = '\0';
	p = dot + 1;
	if (strlen(p) != SIGNIN_STATE_HEX + 1 + MAC_HEX || p[SIGNIN_STATE_HEX] != '.' ||
	    !all_hex(p, SIGNIN_STATE_HEX) || !all_hex(p + SIGNIN_STATE_HEX + 1, MAC_HEX))
		return ap_error_set(AP_EDENIED, "not a sign-in cookie of this server");
	memcpy(mine, p, SIGNIN_STATE_HEX);
	mine[SIGNIN_STATE_HEX] = '\0';
	if (!cookie_mac(s, exp, mine, want))
		return ap_error_set(AP_EUNAVAIL, "sign-in has no key (no client secret)");
	if (CRYPTO_memcmp(want, p + SIGNIN_STATE_HEX + 1, MAC_HEX) != 0)
		return ap_error_set(AP_EDENIED, "the sign-in cookie's signature does not match");
	if (strtoll(exp, NULL, 10) <= now / 1000)
		return ap_error_set(AP_ETIMEOUT, "the sign-in cookie expired");
	if (!state || strlen(state) != SIGNIN_STATE_HEX ||
	    CRYPTO_memcmp(mine, state, SIGNIN_STATE_HEX) != 0)
		return ap_error_set(AP_EINVAL, "the state is not the one of this browser");
	return 0;
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

/* The next entry of the comma-separated list at *cursor (NULL or "" when done), blanks
 * around it dropped: *item and *len, with *cursor moved past it. The one reader of
 * AUTOPATCH_OPERATORS for listed() and signin_next_org(). */
static bool next_entry(const char **cursor, const char **item, size_t *len)
{
	const char *p = *cursor, *end;

	if (!p || !*p)
		return false;
	end = strchr(p, ',');
	while (*p == ' ')
		p++;
	*len = end ? (size_t)(end - p) : strlen(p);
	while (*len && p[*len - 1] == ' ')
		(*len)--;
	*item = p;
	*cursor = end ? end + 1 : p + strlen(p);
	return true;
}

static bool listed(const char *list, const char *login)
{
	size_t n = strlen(login), len;
	const char *item;

	for (const char *cursor = list; next_entry(&cursor, &item, &len);)
		if (len == n && strncasecmp(item, login, n) == 0)
			return true;
	return false;
}

bool signin_next_org(const char **cursor, char *org, size_t cap)
{
	const char *item;
	size_t len;

	while (next_entry(cursor, &item, &len))
		if (len > 4 && len - 4 < cap && strncasecmp(item, "org:", 4) == 0) {
			memcpy(org, item + 4, len - 4);
			org[len - 4] = '\0';
			return true;
		}
	return false;
}

/* A question GitHub does not answer counts as "no" and is logged. */
bool signin_is_operator(signin *s, const char *login, const char *token)
{
	const char *cursor = s->cfg.operators;
	char org[SIGNIN_ORG_MAX + 1];

	if (listed(s->cfg.operators, login))
		return true;
	while (signin_next_org(&cursor, org, sizeof(org))) {
		bool yes = false;

		if (s->cfg.in_org(s->cfg.ud, token, org, &yes) != 0)
			ap_warn("console: cannot ask GitHub whether %s belongs to %s: %s", login,
				org, ap_error_last());
		else if (yes)
			return true;
	}
	return false;
}

void signin_start(signin *s, flow_answer *a)
{
	char state[SIGNIN_STATE_HEX + 1], cookie[SIGNIN_COOKIE_MAX], *id = NULL, *secret = NULL;
	ap_buf where = AP_BUF_INIT(FLOW_URL_MAX);

	if (!s->cfg.console_url || !oauth_creds(s, &id, &secret)) {
		flow_problem(
		    a, 503, "Sign-in is not set up",
		    "The console has no OAuth credentials of the App (or no URL of its own).",
		    "set GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET and AUTOPATCH_CONSOLE_URL (the "
		    "registration at /setup writes the first two)");
		return;
	}
	if (signin_cookie_make(s, ap_wall_ms(), state, cookie) ||
	    ap_buf_addf(&where, "%s/login/oauth/authorize?client_id=", s->cfg.web_url) ||
	    form_escape(&where, id) || ap_buf_adds(&where, "&redirect_uri=") ||
	    form_escape(&where, s->cfg.console_url) || ap_buf_adds(&where, "%2Flogin%2Fcallback") ||
	    ap_buf_addf(&where, "&state=%s", state)) {
		flow_problem(a, 500, "Cannot start the sign-in", ap_error_last(), "try again");
	} else if (flow_redirect(a, ap_buf_str(&where)) == 0) {
		flow_cookie(a,
			    SIGNIN_COOKIE "=%s; Path=/login; Max-Age=%d; HttpOnly;%s SameSite=Lax",
			    cookie, SIGNIN_TTL_MS / 1000, s->secure ? " Secure;" : "");
	}
	ap_buf_release(&where);
	free(id);
	wipe_free(secret);
}

/* The state must be the one this browser was given, in a cookie this server signed and that
 * has not expired; true when a problem (and the cookie's removal) was written to *a. */
static bool refused(signin *s, const char *state, const char *cookie_header, flow_answer *a)
{
	char cookie[SIGNIN_COOKIE_MAX];
	int rc = form_cookie(cookie_header, SIGNIN_COOKIE, cookie, sizeof(cookie));

	if (rc == 0 && !cookie[0])
		rc = AP_ENOTFOUND; /* "ap_login=" is no cookie either */
	if (rc == AP_ENOTFOUND)
		flow_problem(
		    a, 400, "Sign-in refused",
		    "This browser holds no sign-in in progress: the sign-in cookie is "
		    "missing. It lasts ten minutes and only the browser that opened /login "
		    "has it.",
		    "sign in again from /login in this browser, with cookies allowed for "
		    "this site");
	else if (rc || (rc = signin_cookie_check(s, cookie, state, ap_wall_ms())) == AP_EDENIED)
		flow_problem(a, 400, "Sign-in refused",
			     "The sign-in cookie was not signed by this server: it was altered, or "
			     "signed with another client secret.",
			     "sign in again from /login");
	else if (rc == AP_ETIMEOUT)
		flow_problem(a, 400, "The sign-in expired",
			     "More than ten minutes passed since this sign-in started.",
			     "sign in again from /login");
	else if (rc == AP_EINVAL)
		flow_problem(
		    a, 400, "Sign-in refused",
		    "The state GitHub sent back is not the one this browser was given: the "
		    "sign-in was started in another browser or tab, or the link was forged.",
		    "sign in again from /login");
	else if (rc)
		flow_problem(
		    a, 400, "Sign-in incomplete", "Sign-in is not set up (no client secret).",
		    "set GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET, then sign in from /login");
	if (!rc)
		return false;
	/* A cookie that cannot succeed any more goes; one that only met another state stays, so
	 * a forged link opened in this browser does not end the sign-in it has in progress. */
	if (rc != AP_EINVAL)
		flow_cookie(a, SIGNIN_COOKIE "=; Path=/login; Max-Age=0; HttpOnly;%s SameSite=Lax",
			    s->secure ? " Secure;" : "");
	return true;
}

void signin_finish(signin *s, sess_store *sessions, int64_t ttl_ms, const char *code,
		   const char *state, const char *cookie_header, char sid[SESS_HEX + 1],
		   flow_answer *a)
{
	char cb[FLOW_URL_MAX];
	char *id = NULL, *secret = NULL, *token = NULL, *login = NULL;
	int rc;

	sid[0] = '\0';
	if (refused(s, state, cookie_header, a))
		return;
	if (!code || !s->cfg.console_url || !oauth_creds(s, &id, &secret)) {
		flow_problem(a, 400, "Sign-in incomplete",
			     "GitHub sent no code, or sign-in is not set up.",
			     "sign in again from /login");
		return;
	}
	if (ap_fmt(cb, sizeof(cb), "%s/login/callback", s->cfg.console_url)) {
		flow_problem(a, 500, "Sign-in failed",
			     "The console's address is too long for the sign-in callback.",
			     "use a shorter AUTOPATCH_CONSOLE_URL");
		ap_error_clear();
		goto out;
	}
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
	flow_cookie(a, SIGNIN_COOKIE "=; Path=/login; Max-Age=0; HttpOnly;%s SameSite=Lax",
		    s->secure ? " Secure;" : "");
out:
	wipe_free(token);
	free(login);
	free(id);
	wipe_free(secret);
}
