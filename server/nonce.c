/* SPDX-License-Identifier: MIT */
/* server/nonce.c - one-time server-side random values (see nonce.h). */
#include "server/nonce.h"

#include "common/err.h"
#include "common/slots.h"

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
	ap_slots t; /* first: entries are struct entry */
};

int nonce_store_new(nonce_store **out, int cap)
{
	return ap_slots_new((void **)out, sizeof(**out), cap, sizeof(struct entry),
			    "a nonce store needs room for one");
}

void nonce_store_free(nonce_store *s)
{
	if (s)
		ap_slots_free(&s->t);
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
	pthread_mutex_lock(&s->t.lock);
	/* A free (used or expired) slot, else the oldest. */
	for (int i = 0; i < s->t.cap; i++) {
		struct entry *e = ap_slots_at(&s->t, i);

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
	pthread_mutex_unlock(&s->t.lock);
	return 0;
}

int nonce_redeem(nonce_store *s, const char *kind, const char *value, int64_t now)
{
	int rc = AP_ENOTFOUND;

	if (!value || strlen(value) != NONCE_HEX)
		return AP_ENOTFOUND;
	pthread_mutex_lock(&s->t.lock);
	for (int i = 0; i < s->t.cap; i++) {
		struct entry *e = ap_slots_at(&s->t, i);

		if (!e->kind || e->used || CRYPTO_memcmp(e->value, value, NONCE_HEX) != 0)
			continue;
		if (strcmp(e->kind, kind) != 0)
			break;
		e->used = true;
		rc = e->expires > now ? 0 : AP_ETIMEOUT;
		break;
	}
	pthread_mutex_unlock(&s->t.lock);
	return rc;
}
