/* SPDX-License-Identifier: MIT */
/* tests/server/test_signin.c - the console's sign-in (server/signin.c): the state cookie that
 * binds a pending sign-in to its browser (signed, short-lived, checked against GitHub's
 * state), its key (HKDF-SHA256 of the client secret, checked against OpenSSL's own HKDF), and
 * the whole flow over fake GitHub calls: 10,000 anonymous starts evict nobody. */
#include "common/clock.h"
#include "common/err.h"
#include "server/session.h"
#include "server/signin.h"

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define T0 1700000000000LL

static int fake_exchange(void *ud, const char *id, const char *secret, const char *code,
			 const char *redirect_uri, char **token)
{
	(void)ud;
	assert_string_equal(id, "Iv1.client");
	assert_string_equal(secret, "client-secret-1");
	assert_string_equal(redirect_uri, "https://console.example.org/login/callback");
	if (strcmp(code, "good") != 0)
		return ap_error_set(AP_EDENIED, "bad code");
	*token = strdup("gho_token");
	return 0;
}

static int fake_login(void *ud, const char *token, char **login)
{
	(void)ud;
	assert_string_equal(token, "gho_token");
	*login = strdup("alice");
	return 0;
}

static int fake_in_org(void *ud, const char *token, const char *org, bool *yes)
{
	(void)ud;
	(void)token;
	if (strcmp(org, "broken") == 0)
		return ap_error_set(AP_EHTTP, "GitHub said 500");
	*yes = strcmp(org, "acme") == 0;
	return 0;
}

static signin *make(const char *secret, const char *operators)
{
	signin_config cfg = {
	    .console_url = "https://console.example.org",
	    .web_url = "https://github.example.org",
	    .client_id = "Iv1.client",
	    .client_secret = secret,
	    .operators = operators,
	    .exchange = fake_exchange,
	    .user_login = fake_login,
	    .in_org = fake_in_org,
	};
	signin *s = NULL;

	assert_int_equal(signin_new(&s, &cfg), 0);
	return s;
}

static void test_key_is_hkdf_sha256_of_the_client_secret(void **state)
{
	unsigned char mine[SIGNIN_KEY_LEN], theirs[SIGNIN_KEY_LEN], other[SIGNIN_KEY_LEN];
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(kdf);
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, "client-secret-1", 15),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, SIGNIN_KEY_SALT,
					      strlen(SIGNIN_KEY_SALT)),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, SIGNIN_KEY_INFO,
					      strlen(SIGNIN_KEY_INFO)),
	    OSSL_PARAM_construct_end(),
	};

	(void)state;
	assert_non_null(ctx);
	assert_int_equal(EVP_KDF_derive(ctx, theirs, sizeof(theirs), params), 1);
	EVP_KDF_CTX_free(ctx);
	EVP_KDF_free(kdf);
	assert_int_equal(signin_key("client-secret-1", mine), 0);
	assert_memory_equal(mine, theirs, SIGNIN_KEY_LEN);
	assert_int_equal(signin_key("client-secret-2", other), 0);
	assert_memory_not_equal(mine, other, SIGNIN_KEY_LEN);
	assert_int_equal(signin_key("", other), AP_EINVAL);
	assert_int_equal(signin_key(NULL, other), AP_EINVAL);
}

static void test_cookie_carries_its_state_and_expiry(void **state)
{
	signin *s = make("client-secret-1", NULL);
	char st[SIGNIN_STATE_HEX + 1], cookie[SIGNIN_COOKIE_MAX], st2[SIGNIN_STATE_HEX + 1],
	    cookie2[SIGNIN_COOKIE_MAX], want[64];

	(void)state;
	assert_int_equal(signin_cookie_make(s, T0, st, cookie), 0);
	assert_int_equal(strlen(st), SIGNIN_STATE_HEX);
	snprintf(want, sizeof(want), "v1.%lld.", (T0 + SIGNIN_TTL_MS) / 1000);
	assert_int_equal(strncmp(cookie, want, strlen(want)), 0);
	assert_int_equal(strncmp(cookie + strlen(want), st, SIGNIN_STATE_HEX), 0);
	assert_int_equal(signin_cookie_check(s, cookie, st, T0), 0);
	assert_int_equal(signin_cookie_check(s, cookie, st, T0 + SIGNIN_TTL_MS - 1000), 0);
	/* Ten minutes on, it is over (and says so, apart from a forgery). */
	assert_int_equal(signin_cookie_check(s, cookie, st, T0 + SIGNIN_TTL_MS), AP_ETIMEOUT);
	assert_int_equal(signin_cookie_check(s, cookie, st, T0 + 3600000), AP_ETIMEOUT);
	/* Each start has its own state; one browser's cookie does not carry another's. */
	assert_int_equal(signin_cookie_make(s, T0, st2, cookie2), 0);
	assert_string_not_equal(st, st2);
	assert_int_equal(signin_cookie_check(s, cookie, st2, T0), AP_EINVAL);
	assert_int_equal(signin_cookie_check(s, cookie2, st, T0), AP_EINVAL);
	assert_int_equal(signin_cookie_check(s, cookie, NULL, T0), AP_EINVAL);
	assert_int_equal(signin_cookie_check(s, cookie, "abc", T0), AP_EINVAL);
	signin_free(s);
}

static void test_tampered_cookie_is_refused(void **state)
{
	signin *s = make("client-secret-1", NULL);
	signin *other = make("client-secret-2", NULL);
	char st[SIGNIN_STATE_HEX + 1], cookie[SIGNIN_COOKIE_MAX], bad[SIGNIN_COOKIE_MAX + 8];
	size_t n;

	(void)state;
	assert_int_equal(signin_cookie_make(s, T0, st, cookie), 0);
	n = strlen(cookie);
	/* Every single changed character (expiry, state or MAC) is a forgery. */
	for (size_t i = 0; i < n; i++) {
		memcpy(bad, cookie, n + 1);
		bad[i] = bad[i] == '1' ? '2' : '1';
		assert_int_not_equal(signin_cookie_check(s, bad, st, T0), 0);
		if (i >= 3 && bad[i] != '.' && cookie[i] != '.')
			assert_int_equal(signin_cookie_check(s, bad, st, T0), AP_EDENIED);
	}
	/* A later expiry with the old MAC, the state swapped to match a forged link. */
	snprintf(bad, sizeof(bad), "v1.%lld%s", (T0 + 86400000) / 1000, strchr(cookie + 3, '.'));
	assert_int_equal(signin_cookie_check(s, bad, st, T0), AP_EDENIED);
	/* Signed with another client secret (another App). */
	assert_int_equal(signin_cookie_check(other, cookie, st, T0), AP_EDENIED);
	/* Shapes. */
	assert_int_equal(signin_cookie_check(s, "", st, T0), AP_EDENIED);
	assert_int_equal(signin_cookie_check(s, st, st, T0), AP_EDENIED);
	assert_int_equal(signin_cookie_check(s, NULL, st, T0), AP_EDENIED);
	memcpy(bad, cookie, n + 1);
	bad[n - 1] = '\0';
	assert_int_equal(signin_cookie_check(s, bad, st, T0), AP_EDENIED);
	snprintf(bad, sizeof(bad), "%sa", cookie);
	assert_int_equal(signin_cookie_check(s, bad, st, T0), AP_EDENIED);
	memcpy(bad, cookie, n + 1);
	bad[n - 1] = bad[n - 1] >= 'a' ? 'A' : 'X'; /* upper case is not our hex */
	assert_int_equal(signin_cookie_check(s, bad, st, T0), AP_EDENIED);
	signin_free(other);
	signin_free(s);
}

/* The value of the ap_login cookie set by a, and the state in its redirect. */
static void split(const flow_answer *a, char *cookie, char *st)
{
	const char *v = a->cookies[0] + strlen(SIGNIN_COOKIE "="), *q;

	assert_int_equal(a->status, 303);
	assert_int_equal(a->ncookies, 1);
	assert_int_equal(strncmp(a->cookies[0], SIGNIN_COOKIE "=", strlen(SIGNIN_COOKIE) + 1), 0);
	memcpy(cookie, v, (size_t)(strchr(v, ';') - v));
	cookie[strchr(v, ';') - v] = '\0';
	q = strstr(a->location, "&state=");
	assert_non_null(q);
	snprintf(st, SIGNIN_STATE_HEX + 1, "%s", q + 7);
}

static void test_ten_thousand_anonymous_starts_evict_nobody(void **state)
{
	signin *s = make("client-secret-1", "bob, org:acme");
	sess_store *sessions = NULL;
	char cookie[SIGNIN_COOKIE_MAX], st[SIGNIN_STATE_HEX + 1], hdr[SIGNIN_COOKIE_MAX + 64];
	char sid[SESS_HEX + 1];
	flow_answer a = {0}, b;
	sess_info info;

	(void)state;
	assert_int_equal(sess_store_new(&sessions, 4), 0);
	signin_start(s, &a);
	split(&a, cookie, st);
	assert_non_null(strstr(a.location,
			       "https://github.example.org/login/oauth/authorize?"
			       "client_id=Iv1.client&redirect_uri=https%3A%2F%2Fconsole."
			       "example.org%2Flogin%2Fcallback&state="));
	assert_non_null(strstr(a.cookies[0], "; Path=/login; Max-Age=600; HttpOnly; Secure; "
					     "SameSite=Lax"));
	for (int i = 0; i < 10000; i++) {
		memset(&b, 0, sizeof(b));
		signin_start(s, &b);
		assert_int_equal(b.status, 303);
	}
	snprintf(hdr, sizeof(hdr), "other=1; " SIGNIN_COOKIE "=%s", cookie);
	memset(&b, 0, sizeof(b));
	signin_finish(s, sessions, 60000, "good", st, hdr, sid, &b);
	assert_int_equal(b.status, 303);
	assert_string_equal(b.location, "/");
	assert_int_equal(strlen(sid), SESS_HEX);
	/* The state cookie is cleared. */
	assert_non_null(strstr(b.cookies[0], SIGNIN_COOKIE "=; Path=/login; Max-Age=0"));
	assert_int_equal(sess_get(sessions, sid, ap_wall_ms(), &info), 0);
	assert_string_equal(info.login, "alice");
	assert_true(info.operator); /* a member of org:acme */
	sess_store_free(sessions);
	signin_free(s);
}

static void test_callback_refusals_say_what_failed(void **state)
{
	signin *s = make("client-secret-1", NULL);
	sess_store *sessions = NULL;
	char cookie[SIGNIN_COOKIE_MAX], st[SIGNIN_STATE_HEX + 1], hdr[SIGNIN_COOKIE_MAX + 64];
	char sid[SESS_HEX + 1], old[SIGNIN_COOKIE_MAX], old_st[SIGNIN_STATE_HEX + 1];
	flow_answer a = {0}, b = {0};

	(void)state;
	assert_int_equal(sess_store_new(&sessions, 4), 0);
	signin_start(s, &a);
	split(&a, cookie, st);
	/* No cookie at all. */
	signin_finish(s, sessions, 60000, "good", st, NULL, sid, &b);
	assert_int_equal(b.status, 400);
	assert_string_equal(sid, "");
	assert_non_null(strstr(b.what, "holds no sign-in in progress"));
	/* Another browser's state. */
	memset(&b, 0, sizeof(b));
	snprintf(hdr, sizeof(hdr), SIGNIN_COOKIE "=%s", cookie);
	signin_finish(s, sessions, 60000, "good",
		      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", hdr, sid,
		      &b);
	assert_int_equal(b.status, 400);
	assert_non_null(strstr(b.what, "not the one this browser was given"));
	assert_int_equal(b.ncookies, 0); /* the sign-in in progress is kept */
	/* A cookie that is too old (made ten minutes and more ago). */
	memset(&b, 0, sizeof(b));
	assert_int_equal(signin_cookie_make(s, ap_wall_ms() - SIGNIN_TTL_MS - 1000, old_st, old),
			 0);
	snprintf(hdr, sizeof(hdr), SIGNIN_COOKIE "=%s", old);
	signin_finish(s, sessions, 60000, "good", old_st, hdr, sid, &b);
	assert_int_equal(b.status, 400);
	assert_string_equal(b.title, "The sign-in expired");
	assert_non_null(strstr(b.cookies[0], "Max-Age=0"));
	/* A tampered one. */
	memset(&b, 0, sizeof(b));
	snprintf(old, sizeof(old), "%s", cookie);
	old[strlen(old) - 1] = old[strlen(old) - 1] == '0' ? '1' : '0';
	snprintf(hdr, sizeof(hdr), SIGNIN_COOKIE "=%s", old);
	signin_finish(s, sessions, 60000, "good", st, hdr, sid, &b);
	assert_int_equal(b.status, 400);
	assert_non_null(strstr(b.what, "not signed by this server"));
	/* The right state, but GitHub's code is refused. */
	memset(&b, 0, sizeof(b));
	snprintf(hdr, sizeof(hdr), SIGNIN_COOKIE "=%s", cookie);
	signin_finish(s, sessions, 60000, "bad", st, hdr, sid, &b);
	assert_int_equal(b.status, 403);
	assert_string_equal(sid, "");
	sess_store_free(sessions);
	signin_free(s);
}

/* A console URL too long for the callback address fails the sign-in with a sentence; a cut
 * callback would send GitHub another redirect_uri (fake_exchange would see it). */
static void test_long_console_url_is_refused_not_cut(void **state)
{
	static char url[FLOW_URL_MAX + 64];
	signin_config cfg = {
	    .console_url = url,
	    .web_url = "https://github.example.org",
	    .client_id = "Iv1.client",
	    .client_secret = "client-secret-1",
	    .exchange = fake_exchange,
	    .user_login = fake_login,
	    .in_org = fake_in_org,
	};
	char cookie[SIGNIN_COOKIE_MAX], st[SIGNIN_STATE_HEX + 1], hdr[SIGNIN_COOKIE_MAX + 64];
	char sid[SESS_HEX + 1];
	sess_store *sessions = NULL;
	signin *s = NULL;
	flow_answer a = {0};

	(void)state;
	memset(url, 'a', sizeof(url) - 1);
	memcpy(url, "https://", 8);
	url[FLOW_URL_MAX - 10] = '\0'; /* fits a redirect, not with "/login/callback" */
	assert_int_equal(signin_new(&s, &cfg), 0);
	assert_int_equal(sess_store_new(&sessions, 4), 0);
	assert_int_equal(signin_cookie_make(s, ap_wall_ms(), st, cookie), 0);
	snprintf(hdr, sizeof(hdr), SIGNIN_COOKIE "=%s", cookie);
	signin_finish(s, sessions, 60000, "good", st, hdr, sid, &a);
	assert_int_equal(a.status, 500);
	assert_string_equal(sid, "");
	assert_non_null(strstr(a.what, "too long for the sign-in callback"));
	sess_store_free(sessions);
	signin_free(s);
}

static void test_not_set_up_and_plain_http(void **state)
{
	signin_config cfg = {.console_url = "http://127.0.0.1:9464", .web_url = "https://gh"};
	signin *s = NULL;
	flow_answer a = {0};
	char st[SIGNIN_STATE_HEX + 1], cookie[SIGNIN_COOKIE_MAX];

	(void)state;
	assert_int_equal(signin_new(&s, &cfg), 0);
	signin_start(s, &a);
	assert_int_equal(a.status, 503);
	assert_int_equal(signin_cookie_make(s, T0, st, cookie), AP_EUNAVAIL);
	/* After a registration: set up, and no Secure cookie on a plain-HTTP console. */
	signin_set_client(s, "Iv1.new", "new-secret");
	memset(&a, 0, sizeof(a));
	signin_start(s, &a);
	assert_int_equal(a.status, 303);
	assert_null(strstr(a.cookies[0], "Secure"));
	assert_non_null(strstr(a.cookies[0], "HttpOnly; SameSite=Lax"));
	signin_free(s);
	signin_free(NULL);
}

static void test_operators(void **state)
{
	signin *s = make("client-secret-1", " Bob ,org:broken, org:acme");
	signin *none = make("client-secret-1", NULL);

	(void)state;
	assert_true(signin_is_operator(s, "bob", "t"));
	assert_true(signin_is_operator(s, "alice", "t")); /* via acme; broken counts as no */
	assert_false(signin_is_operator(none, "bob", "t"));
	signin_free(none);
	signin_free(s);
}

static void test_org_entries(void **state)
{
	char list[200], org[SIGNIN_ORG_MAX + 1];
	const char *cursor = list;

	(void)state;
	snprintf(list, sizeof(list), "alice, org:acme ,ORG:Beta,org:, org:%064d,org:last", 0);
	assert_true(signin_next_org(&cursor, org, sizeof(org)));
	assert_string_equal(org, "acme");
	assert_true(signin_next_org(&cursor, org, sizeof(org)));
	assert_string_equal(org, "Beta");
	assert_true(signin_next_org(&cursor, org, sizeof(org))); /* empty and 64 bytes skipped */
	assert_string_equal(org, "last");
	assert_false(signin_next_org(&cursor, org, sizeof(org)));
	cursor = NULL;
	assert_false(signin_next_org(&cursor, org, sizeof(org)));
	cursor = "alice,bob";
	assert_false(signin_next_org(&cursor, org, sizeof(org)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_is_hkdf_sha256_of_the_client_secret),
	    cmocka_unit_test(test_cookie_carries_its_state_and_expiry),
	    cmocka_unit_test(test_tampered_cookie_is_refused),
	    cmocka_unit_test(test_ten_thousand_anonymous_starts_evict_nobody),
	    cmocka_unit_test(test_callback_refusals_say_what_failed),
	    cmocka_unit_test(test_long_console_url_is_refused_not_cut),
	    cmocka_unit_test(test_not_set_up_and_plain_http),
	    cmocka_unit_test(test_operators),
	    cmocka_unit_test(test_org_entries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
