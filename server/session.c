/* SPDX-License-Identifier: MIT */
/* server/session.c - the console's session table (see session.h). */
#include "server/session.h"

#include "common/err.h"
#include "common/slots.h"
#include "server/nonce.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERMS 32

struct perm {
	char repo[SESS_REPO_MAX + 1];
	bool yes;
	int64_t at;
};

struct sess {
	bool live;
	char id[SESS_HEX + 1];
	sess_info info;
	char *token;
	struct perm perms[PERMS];
};

struct sess_store {
	ap_slots t; /* first: entries are struct sess */
};

static void drop(struct sess *e)
{
	if (e->token) {
		OPENSSL_cleanse(e->token, strlen(e->token));
		free(e->token);
	}
	OPENSSL_cleanse(e, sizeof(*e));
}

int sess_store_new(sess_store **out, int cap)
{
	return ap_slots_new((void **)out, sizeof(**out), cap, sizeof(struct sess),
			    "a session table needs room for one");
}

void sess_store_free(sess_store *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->t.cap; i++)
		drop(ap_slots_at(&s->t, i));
	ap_slots_free(&s->t);
}

/* The live session id, or NULL (an expired one is dropped). Under the lock. */
static struct sess *find(sess_store *s, const char *id, int64_t now)
{
	if (!id || strlen(id) != SESS_HEX)
		return NULL;
	for (int i = 0; i < s->t.cap; i++) {
		struct sess *e = ap_slots_at(&s->t, i);

		if (!e->live || CRYPTO_memcmp(e->id, id, SESS_HEX) != 0)
			continue;
		if (e->info.expires <= now) {
			drop(e);
			return NULL;
		}
		return e;
	}
	return NULL;
}

/* When login already holds SESS_PER_LOGIN live signed-in sessions: its oldest, which the new
 * one replaces, so one GitHub account signing in again and again cannot push out anyone
 * else's session. NULL otherwise. Under the lock. */
static struct sess *crowded(sess_store *s, const char *login, int64_t now)
{
	struct sess *oldest = NULL;
	int n = 0;

	for (int i = 0; i < s->t.cap; i++) {
		struct sess *e = ap_slots_at(&s->t, i);

		if (!e->live || e->info.expires <= now || !e->token ||
		    strcmp(e->info.login, login) != 0)
			continue;
		n++;
		if (!oldest || e->info.expires < oldest->info.expires)
			oldest = e;
	}
	return n >= SESS_PER_LOGIN ? oldest : NULL;
}

int sess_create(sess_store *s, const char *login, const char *token, bool operator, int64_t ttl_ms,
		int64_t now, char id[SESS_HEX + 1])
{
	struct sess *slot = NULL, *own_oldest;
	char csrf[SESS_HEX + 1];
	char *tok = NULL;
	int rc;

	if (!login || !*login || strlen(login) > SESS_LOGIN_MAX)
		return ap_error_set(AP_EINVAL, "a session needs a login of at most %d bytes",
				    SESS_LOGIN_MAX);
	if ((rc = nonce_random_hex(id, SESS_HEX / 2)) ||
	    (rc = nonce_random_hex(csrf, SESS_HEX / 2)))
		return rc;
	if (token && !(tok = strdup(token)))
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_lock(&s->t.lock);
	own_oldest = token ? crowded(s, login, now) : NULL;
	for (int i = 0; !own_oldest && i < s->t.cap; i++) {
		struct sess *e = ap_slots_at(&s->t, i);

		if (!e->live || e->info.expires <= now) {
			slot = e;
			break;
		}
		if (!slot || e->info.expires < slot->info.expires)
			slot = e;
	}
	if (own_oldest)
		slot = own_oldest;
	drop(slot);
	slot->live = true;
	memcpy(slot->id, id, SESS_HEX + 1);
	snprintf(slot->info.login, sizeof(slot->info.login), "%s", login); /* length checked */
	memcpy(slot->info.csrf, csrf, SESS_HEX + 1);
	slot->info.operator= operator;
	slot->info.expires = now + ttl_ms;
	slot->token = tok;
	pthread_mutex_unlock(&s->t.lock);
	OPENSSL_cleanse(csrf, sizeof(csrf));
	return 0;
}

int sess_get(sess_store *s, const char *id, int64_t now, sess_info *out)
{
	struct sess *e;
	int rc = AP_ENOTFOUND;

	pthread_mutex_lock(&s->t.lock);
	e = find(s, id, now);
	if (e) {
		*out = e->info;
		rc = 0;
	}
	pthread_mutex_unlock(&s->t.lock);
	return rc;
}

bool sess_csrf_ok(sess_store *s, const char *id, const char *csrf, int64_t now)
{
	struct sess *e;
	bool ok = false;

	if (!csrf || strlen(csrf) != SESS_HEX)
		return false;
	pthread_mutex_lock(&s->t.lock);
	e = find(s, id, now);
	if (e)
		ok = CRYPTO_memcmp(e->info.csrf, csrf, SESS_HEX) == 0;
	pthread_mutex_unlock(&s->t.lock);
	return ok;
}

int sess_token(sess_store *s, const char *id, int64_t now, char **out)
{
	struct sess *e;
	int rc = AP_ENOTFOUND;

	*out = NULL;
	pthread_mutex_lock(&s->t.lock);
	e = find(s, id, now);
	if (e && e->token) {
		*out = strdup(e->token);
		rc = *out ? 0 : AP_ENOMEM;
	}
	pthread_mutex_unlock(&s->t.lock);
	return rc;
}

int sess_perm_get(sess_store *s, const char *id, const char *repo, int64_t now, bool *yes)
{
	struct sess *e;
	int rc = AP_ENOTFOUND;

	pthread_mutex_lock(&s->t.lock);
	e = find(s, id, now);
	for (int i = 0; e && i < PERMS; i++)
		if (e->perms[i].repo[0] && strcmp(e->perms[i].repo, repo) == 0 &&
		    now - e->perms[i].at < SESS_PERM_TTL_MS) {
			*yes = e->perms[i].yes;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&s->t.lock);
	return rc;
}

void sess_perm_put(sess_store *s, const char *id, const char *repo, bool yes, int64_t now)
{
	struct sess *e;
	struct perm *slot = NULL;

	if (strlen(repo) > SESS_REPO_MAX)
		return;
	pthread_mutex_lock(&s->t.lock);
	e = find(s, id, now);
	for (int i = 0; e && i < PERMS; i++) {
		struct perm *p = &e->perms[i];

		if (!p->repo[0] || strcmp(p->repo, repo) == 0) {
			slot = p;
			break;
		}
		if (!slot || p->at < slot->at)
			slot = p;
	}
	if (slot) {
		snprintf(slot->repo, sizeof(slot->repo), "%s", repo); /* length checked */
		slot->yes = yes;
		slot->at = now;
	}
	pthread_mutex_unlock(&s->t.lock);
}

void sess_end(sess_store *s, const char *id)
{
	struct sess *e;

	pthread_mutex_lock(&s->t.lock);
	e = find(s, id, INT64_MIN);
	if (e)
		drop(e);
	pthread_mutex_unlock(&s->t.lock);
}
