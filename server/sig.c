/* SPDX-License-Identifier: MIT */
/* server/sig.c - webhook signature verification (see sig.h and github-app.md §2). */
#include "server/sig.h"

#include "common/err.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

#define SIG_PREFIX     "sha256="
#define SIG_PREFIX_LEN 7
#define SIG_BYTES      32

/* Lower-case hex only: GitHub sends lower case, and accepting both would give one signature
 * two spellings for no benefit. */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int hmac(const char *secret, const void *body, size_t len, unsigned char out[SIG_BYTES])
{
	static const unsigned char empty[1];
	unsigned int outlen = 0;
	size_t klen = strlen(secret);

	if (klen > 0x7fffffff)
		return AP_EINVAL;
	if (!HMAC(EVP_sha256(), secret, (int)klen, len ? body : empty, len, out, &outlen) ||
	    outlen != SIG_BYTES)
		return AP_EINVAL;
	return 0;
}

int sig_verify(const char *secret, const void *body, size_t len, const char *header)
{
	unsigned char want[SIG_BYTES], got[SIG_BYTES];
	const char *hex;

	if (!secret || !*secret || !header || (!body && len))
		return AP_EDENIED;
	if (strncmp(header, SIG_PREFIX, SIG_PREFIX_LEN) != 0)
		return AP_EDENIED;
	hex = header + SIG_PREFIX_LEN;
	if (strlen(hex) != 2 * SIG_BYTES)
		return AP_EDENIED;
	for (size_t i = 0; i < SIG_BYTES; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return AP_EDENIED;
		want[i] = (unsigned char)(hi << 4 | lo);
	}
	if (hmac(secret, body, len, got))
		return AP_EDENIED;
	return CRYPTO_memcmp(want, got, SIG_BYTES) == 0 ? 0 : AP_EDENIED;
}

int sig__sign(const char *secret, const void *body, size_t len, char out[SIG_HEADER_LEN])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char mac[SIG_BYTES];

	if (!secret || !*secret || (!body && len))
		return ap_error_set(AP_EINVAL, "signing needs a secret and a body");
	if (hmac(secret, body, len, mac))
		return ap_error_set(AP_EINVAL, "HMAC-SHA256 failed");
	memcpy(out, SIG_PREFIX, SIG_PREFIX_LEN);
	for (size_t i = 0; i < SIG_BYTES; i++) {
		out[SIG_PREFIX_LEN + 2 * i] = digits[mac[i] >> 4];
		out[SIG_PREFIX_LEN + 2 * i + 1] = digits[mac[i] & 15];
	}
	out[SIG_PREFIX_LEN + 2 * SIG_BYTES] = '\0';
	return 0;
}
