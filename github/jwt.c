/* SPDX-License-Identifier: MIT */
/* github/jwt.c - load the App's RSA key and sign RS256 JWTs with OpenSSL's EVP API. */
#include "github/jwt.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_FILE_CAP (64 * 1024)

struct gh_key {
	EVP_PKEY *pkey;
};

static int gh_key_from_pem(gh_key **out, const char *pem, size_t len)
{
	BIO *bio = NULL;
	EVP_PKEY *pkey = NULL;
	gh_key *k;
	int rc = 0;

	*out = NULL;
	if (len > INT32_MAX)
		return ap_error_set(AP_ETOOBIG, "the private key is too large");
	bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio)
		return ap_error_set(AP_ENOMEM, "out of memory reading the private key");
	pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	if (!pkey) {
		rc = ap_error_set(AP_EINVAL,
				  "the private key is not a PEM RSA private key: download a new "
				  "one from the GitHub App's settings page");
		goto out_free_bio;
	}
	if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
		rc = ap_error_set(AP_EINVAL, "the private key is not an RSA key: GitHub Apps "
					     "use the RSA key GitHub generates");
		goto out_free_key;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_free_key;
	}
	k->pkey = pkey;
	*out = k;
	goto out_free_bio;
out_free_key:
	EVP_PKEY_free(pkey);
out_free_bio:
	BIO_free(bio);
	return rc;
}

/* PRIVATE_KEY may hold the PEM with literal "\n" escapes (single-line .env files) or, as
 * Probot allows, the whole PEM base64-encoded. */
static int unescape_pem(ap_buf *b, const char *v)
{
	int rc = 0;

	for (const char *p = v; *p && !rc; p++) {
		if (p[0] == '\\' && p[1] == 'n') {
			rc = ap_buf_add(b, "\n", 1);
			p++;
		} else {
			rc = ap_buf_add(b, p, 1);
		}
	}
	return rc;
}

static int decode_base64_pem(ap_buf *b, const char *v)
{
	size_t n = strlen(v);
	unsigned char *tmp;
	int got, rc;

	tmp = malloc(n + 4);
	if (!tmp)
		return ap_error_set(AP_ENOMEM, "out of memory");
	got = EVP_DecodeBlock(tmp, (const unsigned char *)v, (int)n);
	if (got < 0) {
		free(tmp);
		return ap_error_set(AP_EINVAL, "PRIVATE_KEY is neither a PEM nor base64");
	}
	while (got > 0 && tmp[got - 1] == 0)
		got--;
	rc = ap_buf_add(b, tmp, (size_t)got);
	OPENSSL_cleanse(tmp, n + 4);
	free(tmp);
	return rc;
}

/* fs_read_file() with the messages a person setting PRIVATE_KEY_PATH needs. */
static int read_key_file(ap_buf *b, const char *path)
{
	int rc = fs_read_file(b, path, 0);

	if (rc == AP_ETOOBIG)
		rc = ap_error_set(AP_ETOOBIG, "PRIVATE_KEY_PATH %s is too large for a key", path);
	else if (rc == AP_ENOTFOUND || rc == AP_EIO)
		rc = ap_error_set(AP_EINVAL,
				  "PRIVATE_KEY_PATH %s cannot be read: point it at the .pem file "
				  "downloaded from the GitHub App's settings page",
				  path);
	return rc;
}

int gh_key_load(gh_key **out, const ap_config *cfg)
{
	const char *path = cfg_str(cfg, "PRIVATE_KEY_PATH");
	const char *inline_key = cfg_str(cfg, "PRIVATE_KEY");
	ap_buf pem = AP_BUF_INIT(KEY_FILE_CAP);
	int rc;

	*out = NULL;
	if (path)
		rc = read_key_file(&pem, path);
	else if (inline_key && strstr(inline_key, "-----BEGIN"))
		rc = unescape_pem(&pem, inline_key);
	else if (inline_key)
		rc = decode_base64_pem(&pem, inline_key);
	else
		return ap_error_set(AP_EINVAL,
				    "set PRIVATE_KEY_PATH to the .pem file downloaded from the "
				    "GitHub App's settings page (or PRIVATE_KEY to its contents)");
	if (rc)
		goto out_release;
	rc = gh_key_from_pem(out, ap_buf_str(&pem), pem.len);
	if (rc && path)
		ap_error_set(rc,
			     "PRIVATE_KEY_PATH %s is not a PEM RSA private key: download a new "
			     "one from the GitHub App's settings page",
			     path);
out_release:
	if (pem.data)
		OPENSSL_cleanse(pem.data, pem.len);
	ap_buf_release(&pem);
	return rc;
}

void gh_key_free(gh_key *key)
{
	if (!key)
		return;
	EVP_PKEY_free(key->pkey);
	free(key);
}

/* base64url without padding (RFC 7515 section 2). */
static int b64url(ap_buf *b, const unsigned char *in, size_t n)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char q[4];
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		size_t left = n - i;

		if (left > 1)
			v |= (uint32_t)in[i + 1] << 8;
		if (left > 2)
			v |= in[i + 2];
		q[0] = tbl[(v >> 18) & 63];
		q[1] = tbl[(v >> 12) & 63];
		q[2] = tbl[(v >> 6) & 63];
		q[3] = tbl[v & 63];
		rc = ap_buf_add(b, q, left > 2 ? 4 : left + 1);
	}
	return rc;
}

int gh_jwt_sign(char **out, const gh_key *key, const char *iss, int64_t now)
{
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	ap_buf claims = AP_BUF_INIT(1024), tok = AP_BUF_INIT(8192);
	EVP_MD_CTX *md = NULL;
	unsigned char sig[1024];
	size_t siglen = sizeof(sig);
	int rc;

	*out = NULL;
	if (!iss || !*iss || strpbrk(iss, "\"\\"))
		return ap_error_set(AP_EINVAL, "APP_ID is missing or malformed");
	/* A numeric App ID goes out as a number, a client ID ("Iv1.…") as a string. */
	if (strspn(iss, "0123456789") == strlen(iss))
		rc = ap_buf_addf(&claims, "{\"iat\":%lld,\"exp\":%lld,\"iss\":%s}",
				 (long long)(now - 60), (long long)(now + 540), iss);
	else
		rc = ap_buf_addf(&claims, "{\"iat\":%lld,\"exp\":%lld,\"iss\":\"%s\"}",
				 (long long)(now - 60), (long long)(now + 540), iss);
	if (!rc)
		rc = b64url(&tok, (const unsigned char *)header, strlen(header));
	if (!rc)
		rc = ap_buf_add(&tok, ".", 1);
	if (!rc)
		rc = b64url(&tok, (const unsigned char *)claims.data, claims.len);
	if (rc) {
		rc = ap_error_set(rc, "building the JWT failed");
		goto out_release;
	}
	md = EVP_MD_CTX_new();
	if (!md) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_release;
	}
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key->pkey) != 1 ||
	    EVP_DigestSignUpdate(md, tok.data, tok.len) != 1 ||
	    EVP_DigestSignFinal(md, NULL, &siglen) != 1 || siglen > sizeof(sig) ||
	    EVP_DigestSignFinal(md, sig, &siglen) != 1) {
		rc = ap_error_set(AP_EINVAL, "signing the JWT with the private key failed");
		goto out_free_md;
	}
	rc = ap_buf_add(&tok, ".", 1);
	if (!rc)
		rc = b64url(&tok, sig, siglen);
	if (rc) {
		rc = ap_error_set(rc, "building the JWT failed");
		goto out_free_md;
	}
	*out = ap_buf_take(&tok);
	if (!*out)
		rc = ap_error_set(AP_ENOMEM, "out of memory");
out_free_md:
	EVP_MD_CTX_free(md);
out_release:
	ap_buf_release(&claims);
	ap_buf_release(&tok);
	return rc;
}
