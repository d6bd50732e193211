/* SPDX-License-Identifier: MIT */
/* github/app.c - App identity: JWT signing with skew correction and the installation-token
 * cache (see app.h). */
#include "github/app.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/redact.h"
#include "github/jwt.h"
#include "github/rest.h"
#include "github/urls.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct token {
	int64_t inst;
	char *value;
	int64_t expires_at; /* server clock, Unix seconds */
	int64_t minted_at;  /* local clock, Unix seconds */
	struct token *next;
};

struct gh_app {
	const ap_config *cfg;
	gh_key *key;
	char *app_id;
	char *api_url;
	int64_t margin_s;
	pthread_mutex_t lock;	   /* key, app_id, generation, skew and the token list */
	pthread_mutex_t mint_lock; /* one mint at a time, so concurrent callers share it */
	int64_t skew_s;		   /* server clock - local clock */
	uint64_t generation;	   /* bumped by each gh_app_set_identity */
	struct token *tokens;
	gh_creds creds; /* this app as the REST client's credentials */
};

static int creds_token(void *ud, int64_t installation_id, char **out);
static int64_t creds_token_age(void *ud, int64_t installation_id);
static void creds_invalidate(void *ud, int64_t installation_id);
static void creds_set_server_time(void *ud, int64_t server_now);

/* The key in pem (PEM text, or what PRIVATE_KEY accepts), through the settings' loader. */
static int key_from_pem(gh_key **out, const char *pem)
{
	ap_config *tmp = NULL;
	int rc;

	*out = NULL;
	if ((rc = cfg_new_empty(&tmp)) || (rc = cfg_set(tmp, "PRIVATE_KEY", pem ? pem : "")))
		goto out;
	rc = gh_key_load(out, tmp);
out:
	cfg_free(tmp);
	return rc;
}

static int app_new(gh_app **out, const ap_config *cfg, const char *id, const char *pem)
{
	gh_urls urls;
	gh_app *a;
	size_t n;
	int rc;

	*out = NULL;
	if (!id || !*id)
		return ap_error_set(AP_EINVAL, "set APP_ID to the App ID shown on the GitHub App's "
					       "settings page");
	if ((rc = gh_urls_get(cfg, &urls)))
		return rc;
	a = calloc(1, sizeof(*a));
	if (!a)
		return ap_error_set(AP_ENOMEM, "out of memory");
	a->cfg = cfg;
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->mint_lock, NULL);
	rc = cfg_int(cfg, "AUTOPATCH_GH_TOKEN_MARGIN_S", 0, 3000, &a->margin_s);
	if (rc)
		goto err_free;
	rc = pem ? key_from_pem(&a->key, pem) : gh_key_load(&a->key, cfg);
	if (rc)
		goto err_free;
	a->app_id = strdup(id);
	a->api_url = strdup(urls.api);
	if (!a->app_id || !a->api_url) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto err_free;
	}
	n = strlen(a->api_url);
	while (n > 0 && a->api_url[n - 1] == '/')
		a->api_url[--n] = '\0';
	a->creds = (gh_creds){.ud = a,
			      .api_url = a->api_url,
			      .token = creds_token,
			      .token_age = creds_token_age,
			      .invalidate = creds_invalidate,
			      .set_server_time = creds_set_server_time};
	*out = a;
	return 0;
err_free:
	gh_app_free(a);
	return rc;
}

int gh_app_new(gh_app **out, const ap_config *cfg)
{
	return app_new(out, cfg, cfg_str(cfg, "APP_ID"), NULL);
}

int gh_app_new_as(gh_app **out, const ap_config *cfg, const char *app_id, const char *pem)
{
	if (!pem || !*pem) {
		*out = NULL;
		return ap_error_set(AP_EINVAL, "the registration handed over no private key");
	}
	return app_new(out, cfg, app_id, pem);
}

static void token_free(struct token *t)
{
	if (!t)
		return;
	if (t->value) {
		memset(t->value, 0, strlen(t->value));
		free(t->value);
	}
	free(t);
}

void gh_app_free(gh_app *app)
{
	struct token *t, *next;

	if (!app)
		return;
	for (t = app->tokens; t; t = next) {
		next = t->next;
		token_free(t);
	}
	gh_key_free(app->key);
	free(app->app_id);
	free(app->api_url);
	pthread_mutex_destroy(&app->lock);
	pthread_mutex_destroy(&app->mint_lock);
	free(app);
}

int gh_app_set_identity(gh_app *app, const char *app_id, const char *pem)
{
	struct token *old_tokens, *next;
	gh_key *key = NULL, *old_key;
	char *id, *old_id;
	int rc;

	if (!app_id || !*app_id)
		return ap_error_set(AP_EINVAL, "the registration handed over no App ID");
	if ((rc = key_from_pem(&key, pem)))
		return rc;
	id = strdup(app_id);
	if (!id) {
		gh_key_free(key);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&app->lock);
	old_key = app->key;
	old_id = app->app_id;
	old_tokens = app->tokens;
	app->key = key;
	app->app_id = id;
	app->tokens = NULL;
	app->skew_s = 0;
	app->generation++;
	pthread_mutex_unlock(&app->lock);
	for (; old_tokens; old_tokens = next) {
		next = old_tokens->next;
		token_free(old_tokens);
	}
	gh_key_free(old_key);
	free(old_id);
	ap_info("the App's identity is now App %s; cached installation tokens dropped", app_id);
	return 0;
}

const gh_creds *gh_app_creds(const gh_app *app)
{
	return &app->creds;
}

static void gh_app_set_server_time(gh_app *app, int64_t server_now)
{
	pthread_mutex_lock(&app->lock);
	app->skew_s = server_now - ap_wall_s();
	pthread_mutex_unlock(&app->lock);
}

/* Signed under the lock: a registration may swap the key and id at any moment. */
static int gh_app_jwt(gh_app *app, char **out)
{
	int rc;

	pthread_mutex_lock(&app->lock);
	rc = gh_jwt_sign(out, app->key, app->app_id, ap_wall_s() + app->skew_s);
	pthread_mutex_unlock(&app->lock);
	return rc;
}

/* The cached token if it is still fresh enough: a malloc'd copy in *out. Caller holds lock. */
static int cached_locked(gh_app *app, int64_t inst, char **out)
{
	for (struct token *t = app->tokens; t; t = t->next) {
		if (t->inst != inst)
			continue;
		if (t->expires_at - (ap_wall_s() + app->skew_s) <= app->margin_s)
			return AP_ENOTFOUND;
		*out = strdup(t->value);
		return *out ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
	}
	return AP_ENOTFOUND;
}

/* Unlink and free the cached token for inst, if there is one. Caller holds lock. */
static void drop_locked(gh_app *app, int64_t inst)
{
	for (struct token **pp = &app->tokens; *pp; pp = &(*pp)->next) {
		if ((*pp)->inst == inst) {
			struct token *old = *pp;

			*pp = old->next;
			token_free(old);
			return;
		}
	}
}

/* "2016-07-11T22:14:10Z" → Unix seconds, -1 if malformed. */
static int64_t parse_iso8601(const char *s)
{
	struct tm tm = {0};
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!end || (*end != 'Z' && *end != '.' && *end != '+' && *end != '\0'))
		return -1;
	return (int64_t)timegm(&tm);
}

static int mint(gh_app *app, int64_t inst, struct token **out)
{
	char path[96];
	gh_rest *r = NULL;
	cJSON *resp = NULL;
	const char *tok, *exp;
	struct token *t;
	int rc;

	*out = NULL;
	rc = gh_rest_new(&r, app->cfg, &app->creds, 0);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/app/installations/%lld/access_tokens", (long long)inst);
	/* (fits: 34 bytes and an integer) */
	/* A second token is harmless: repeat the mint after a 5xx like a read. */
	rc = gh_rest_call_idempotent(r, "POST", path, NULL, &resp);
	if (rc)
		goto out_free_rest;
	tok = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "token"));
	exp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "expires_at"));
	if (!tok || !*tok || parse_iso8601(exp) < 0) {
		rc = ap_error_set(AP_EINVAL, "GitHub POST %s: no token or expires_at in the answer",
				  path);
		goto out_free_resp;
	}
	/* Mask it everywhere before anything could print it. The registration is never taken
	 * back (no redact_remove_secret() when this token is replaced or invalidated): callers
	 * get malloc'd copies with no release call, so nothing tells when the last one is done
	 * (a clone or push may still run with it, and its output may still carry an encoded
	 * form). Removing it early could let that output through; the cost of keeping it is a
	 * handful of variants (plain and base64) per mint, about one mint per installation per
	 * 50 minutes. A refcounted handle in app.h would be needed to remove it safely. */
	rc = redact_add_secret(tok);
	if (rc)
		goto out_free_resp;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->value = strdup(tok))) {
		free(t);
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_free_resp;
	}
	t->inst = inst;
	t->expires_at = parse_iso8601(exp);
	t->minted_at = ap_wall_s();
	*out = t;
	ap_info("minted an installation token for installation %lld (expires %s)", (long long)inst,
		exp);
out_free_resp:
	cJSON_Delete(resp);
out_free_rest:
	gh_rest_free(r);
	return rc;
}

int gh_app_token(gh_app *app, int64_t installation_id, char **out)
{
	struct token *t = NULL;
	uint64_t generation;
	int rc;

	*out = NULL;
	if (installation_id <= 0)
		return ap_error_set(AP_EINVAL, "installation id %lld is not valid",
				    (long long)installation_id);
	pthread_mutex_lock(&app->lock);
	rc = cached_locked(app, installation_id, out);
	pthread_mutex_unlock(&app->lock);
	if (rc != AP_ENOTFOUND)
		return rc;

	pthread_mutex_lock(&app->mint_lock);
	/* Another thread may have minted while this one waited. */
	pthread_mutex_lock(&app->lock);
	rc = cached_locked(app, installation_id, out);
	generation = app->generation;
	pthread_mutex_unlock(&app->lock);
	if (rc != AP_ENOTFOUND)
		goto out_unlock_mint;
	rc = mint(app, installation_id, &t);
	if (rc)
		goto out_unlock_mint;
	*out = strdup(t->value);
	if (!*out) {
		token_free(t);
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_unlock_mint;
	}
	pthread_mutex_lock(&app->lock);
	if (app->generation == generation) {
		drop_locked(app, installation_id);
		t->next = app->tokens;
		app->tokens = t;
		t = NULL;
	}
	pthread_mutex_unlock(&app->lock);
	token_free(t); /* the old App's, minted while the identity changed: not cached */
out_unlock_mint:
	pthread_mutex_unlock(&app->mint_lock);
	return rc;
}

static void gh_app_token_invalidate(gh_app *app, int64_t installation_id)
{
	pthread_mutex_lock(&app->lock);
	drop_locked(app, installation_id);
	pthread_mutex_unlock(&app->lock);
}

static int64_t gh_app_token_age(gh_app *app, int64_t installation_id)
{
	int64_t age = -1;

	pthread_mutex_lock(&app->lock);
	for (struct token *t = app->tokens; t; t = t->next)
		if (t->inst == installation_id)
			age = ap_wall_s() - t->minted_at;
	pthread_mutex_unlock(&app->lock);
	return age;
}

static int creds_token(void *ud, int64_t installation_id, char **out)
{
	return installation_id == 0 ? gh_app_jwt(ud, out) : gh_app_token(ud, installation_id, out);
}

static int64_t creds_token_age(void *ud, int64_t installation_id)
{
	return gh_app_token_age(ud, installation_id);
}

static void creds_invalidate(void *ud, int64_t installation_id)
{
	gh_app_token_invalidate(ud, installation_id);
}

static void creds_set_server_time(void *ud, int64_t server_now)
{
	gh_app_set_server_time(ud, server_now);
}
