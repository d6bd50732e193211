/* SPDX-License-Identifier: MIT */
/* server/nonce.c - one-time server-side random values (see nonce.h). */
#include "server/nonce.h"
#include "common/err.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	bool used;
	const char *kind;
	char value[NONCE_HEX + 1];
	int64_t issued, expires;
};

struct nonce_store {
	pthread_mutex_t lock;
	int cap;
	struct entry *e;
};

int nonce_store_new(nonce_store **out, int cap)
{
	nonce_store *s;

	*out = NULL;
	if (cap < 1)
		return ap_error_set(AP_EINVAL, "a nonce store needs room for one");
	s = calloc(1, sizeof(*s));
	if (s)
		s->e = calloc((size_t)cap, sizeof(*s->e));
	if (!s || !s->e) {
		free(s);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&s->lock, NULL);
	s->cap = cap;
	*out = s;
	return 0;
}

void nonce_store_free(nonce_store *s)
{
	if (!s)
		return;
	OPENSSL_cleanse(s->e, (size_t)s->cap * sizeof(*s->e));
	pthread_mutex_destroy(&s->lock);
	free(s->e);
	free(s);
}

int nonce_random_hex(char *out, int n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[64];

	if (n < 1 || n > 64 || RAND_bytes(raw, n) != 1)
		return ap_error_set(AP_EIO, "no randomness available for a session or state");
	for (int i = 0; i < n; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[2 * n] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

int nonce_issue(nonce_store *s, const char *kind, int64_t ttl_ms, int64_t now,
		char out[NONCE_HEX + 1])
{
	struct entry *slot = NULL;
	int rc;

	if ((rc = nonce_random_hex(out, NONCE_HEX / 2)))
		return rc;
	pthread_mutex_lock(&s->lock);
	/* A free (used or expired) slot, else the oldest. */
	for (int i = 0; i < s->cap; i++) {
		struct entry *e = &s->e[i];

		if (e->used || !e->kind || e->expires <= now) {
			slot = e;
			break;
		}
		if (!slot || e->issued < slot->issued)
			slot = e;
	}
	slot->used = false;
	slot->kind = kind;
	memcpy(slot->value, out, NONCE_HEX + 1);
	slot->issued = now;
	slot->expires = now + ttl_ms;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int nonce_redeem(nonce_store *s, const char *kind, const char *value, int64_t now)
{
	int rc = AP_ENOTFOUND;

	if (!value || strlen(value) != NONCE_HEX)
		return AP_ENOTFOUND;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->cap; i++) {
		struct entry *e = &s->e[i];

		if (!e->kind || e->used || CRYPTO_memcmp(e->value, value, NONCE_HEX) != 0)
			continue;
		if (strcmp(e->kind, kind) != 0)
			break;
		e->used = true;
		rc = e->expires > now ? 0 : AP_ETIMEOUT;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}
