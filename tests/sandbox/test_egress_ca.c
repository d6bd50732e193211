/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_egress_ca.c - AUTOPATCH_SETUP_CA_FILE as sbx_setup_ca_read and
 * sbx_egress_opts_load check it at start-up: unset is fine; a missing file, text without a PEM
 * certificate, a private key in the bundle and a certificate that does not parse are refused
 * with a sentence naming the file; a real bundle (made here with OpenSSL, comments between
 * the blocks) is counted and re-encoded with nothing but its certificates. */
#include "common/buf.h"
#include "common/config.h"
#include "common/err.h"
#include "sandbox/egress.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char path[64];

/* A self-signed CA certificate for cn, in PEM (malloc'd); *key_pem its private key. */
static char *make_cert(const char *cn, char **key_pem)
{
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	X509 *x = X509_new();
	X509_NAME *name;
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *out;
	long n;

	assert_non_null(key);
	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, name);
	assert_true(X509_sign(x, key, NULL) > 0);
	assert_int_equal(PEM_write_bio_X509(b, x), 1);
	n = BIO_get_mem_data(b, &p);
	out = strndup(p, (size_t)n);
	if (key_pem) {
		BIO *k = BIO_new(BIO_s_mem());

		assert_int_equal(PEM_write_bio_PrivateKey(k, key, NULL, NULL, 0, NULL, NULL), 1);
		n = BIO_get_mem_data(k, &p);
		*key_pem = strndup(p, (size_t)n);
		BIO_free(k);
	}
	BIO_free(b);
	X509_free(x);
	EVP_PKEY_free(key);
	return out;
}

static void put(const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* sbx_setup_ca_read with AUTOPATCH_SETUP_CA_FILE=file; the error text in why. */
static int read_ca(const char *file, ap_buf *pem, int *n, char *why, size_t wn)
{
	ap_config *cfg = NULL;
	int rc;

	assert_int_equal(cfg_new_empty(&cfg), 0);
	if (file)
		assert_int_equal(cfg_set(cfg, "AUTOPATCH_SETUP_CA_FILE", file), 0);
	rc = sbx_setup_ca_read(cfg, pem, n);
	snprintf(why, wn, "%s", rc ? ap_error_last() : "");
	if (rc == 0) {
		sbx_egress_opts o;

		assert_int_equal(sbx_egress_opts_load(&o, cfg), 0);
	} else {
		sbx_egress_opts o;

		/* the engine's settings refuse it too: start-up stops */
		assert_int_equal(sbx_egress_opts_load(&o, cfg), rc);
	}
	cfg_free(cfg);
	return rc;
}

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/ap-ca-test-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void test_unset_is_no_bundle(void **state)
{
	ap_buf pem = AP_BUF_INIT(1 << 20);
	char why[600];
	int n = -1;

	(void)state;
	assert_int_equal(read_ca(NULL, &pem, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 0);
	assert_int_equal(pem.len, 0);
	ap_buf_release(&pem);
}

static void test_bad_files_are_refused_with_a_sentence(void **state)
{
	char why[600], *key = NULL, *cert = make_cert("Test CA", &key), *broken, text[8192];
	int n;

	(void)state;
	assert_int_equal(read_ca("/nonexistent/ca.pem", NULL, &n, why, sizeof(why)), AP_EINVAL);
	assert_non_null(strstr(why, "AUTOPATCH_SETUP_CA_FILE cannot be read"));
	assert_non_null(strstr(why, "/nonexistent/ca.pem"));

	put("this is not a certificate\n");
	assert_int_equal(read_ca(path, NULL, &n, why, sizeof(why)), AP_EINVAL);
	assert_non_null(strstr(why, "holds no PEM certificate"));
	assert_non_null(strstr(why, path));

	put("");
	assert_int_equal(read_ca(path, NULL, &n, why, sizeof(why)), AP_EINVAL);
	assert_non_null(strstr(why, "holds no PEM certificate"));

	snprintf(text, sizeof(text), "%s%s", cert, key);
	put(text);
	assert_int_equal(read_ca(path, NULL, &n, why, sizeof(why)), AP_EINVAL);
	assert_non_null(strstr(why, "PRIVATE KEY block, not only certificates"));

	/* a certificate block whose bytes are not a certificate */
	broken = strdup(cert);
	memcpy(strchr(broken, '\n') + 1, "AAAAAAAAAAAAAAAA", 16);
	snprintf(text, sizeof(text), "%s%s", cert, broken);
	put(text);
	assert_int_equal(read_ca(path, NULL, &n, why, sizeof(why)), AP_EINVAL);
	assert_non_null(strstr(why, "certificate 2 cannot be parsed"));
	free(broken);
	free(cert);
	free(key);
}

static void test_a_bundle_is_counted_and_reencoded(void **state)
{
	char *a = make_cert("Corp Root CA", NULL), *b = make_cert("Corp Issuing CA", NULL);
	char text[8192], why[600];
	ap_buf pem = AP_BUF_INIT(1 << 20);
	int n = 0;

	(void)state;
	snprintf(text, sizeof(text), "# the corporate roots\nCorp Root CA\n%s\n\nsecond:\n%s", a,
		 b);
	put(text);
	assert_int_equal(read_ca(path, &pem, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 2);
	/* only the certificates, the comments dropped */
	assert_null(strstr(ap_buf_str(&pem), "#"));
	assert_null(strstr(ap_buf_str(&pem), "second:"));
	assert_non_null(strstr(ap_buf_str(&pem), a));
	assert_non_null(strstr(ap_buf_str(&pem), b));
	assert_int_equal(pem.len, strlen(a) + strlen(b));
	ap_buf_release(&pem);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unset_is_no_bundle),
	    cmocka_unit_test_setup_teardown(test_bad_files_are_refused_with_a_sentence, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_a_bundle_is_counted_and_reencoded, setup,
					    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
