/* SPDX-License-Identifier: MIT */
/* tests/server/test_console.c - what the console parses and keeps: form bodies, query strings
 * and cookies (server/form.c), the one-time state store (server/nonce.c) and the session
 * table with its CSRF tokens and permission cache (server/session.c); a GITHUB_URL too long for
 * the console's security policy stops console_new(). */
#include "common/buf.h"
#include "common/err.h"
#include "server/console.h"
#include "server/form.h"
#include "server/nonce.h"
#include "server/session.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define T0 1700000000000LL

static void test_form_get_decodes(void **state)
{
	const char *body = "a=1&csrf=ab%2Bcd+e&empty=&flag&x=%41%42";
	char out[32];

	(void)state;
	assert_int_equal(form_get(body, strlen(body), "csrf", out, sizeof(out)), 0);
	assert_string_equal(out, "ab+cd e");
	assert_int_equal(form_get(body, strlen(body), "empty", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(form_get(body, strlen(body), "flag", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(form_get(body, strlen(body), "x", out, sizeof(out)), 0);
	assert_string_equal(out, "AB");
	assert_int_equal(form_get(body, strlen(body), "cs", out, sizeof(out)), AP_ENOTFOUND);
	assert_int_equal(form_get(body, strlen(body), "missing", out, sizeof(out)), AP_ENOTFOUND);
}

static void test_form_get_refuses_bad_values(void **state)
{
	char out[4];

	(void)state;
	assert_int_equal(form_get("a=%4", 4, "a", out, sizeof(out)), AP_EINVAL);
	assert_int_equal(form_get("a=%zz", 5, "a", out, sizeof(out)), AP_EINVAL);
	assert_int_equal(form_get("a=%00", 5, "a", out, sizeof(out)), AP_EINVAL);
	/* Too long is refused, never cut (a cut token must not match a stored one). */
	assert_int_equal(form_get("a=abcd", 6, "a", out, sizeof(out)), AP_ETOOBIG);
	assert_int_equal(form_get("a=abc", 5, "a", out, sizeof(out)), 0);
	/* Not NUL-terminated: only len bytes count. */
	assert_int_equal(form_get("a=abXXXX", 4, "a", out, sizeof(out)), 0);
	assert_string_equal(out, "ab");
	assert_int_equal(form_get(NULL, 0, "a", out, sizeof(out)), AP_ENOTFOUND);
}

static void test_form_cookie(void **state)
{
	char out[70];

	(void)state;
	assert_int_equal(form_cookie("a=1; ap_session=abc; b=2", "ap_session", out, sizeof(out)),
			 0);
	assert_string_equal(out, "abc");
	assert_int_equal(
	    form_cookie("xap_session=1;ap_session=\"q\"", "ap_session", out, sizeof(out)), 0);
	assert_string_equal(out, "q");
	assert_int_equal(form_cookie("ap_session=", "ap_session", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(form_cookie("a=1", "ap_session", out, sizeof(out)), AP_ENOTFOUND);
	assert_int_equal(form_cookie(NULL, "ap_session", out, sizeof(out)), AP_ENOTFOUND);
	assert_int_equal(form_cookie("ap_session=a\\b", "ap_session", out, sizeof(out)), AP_EINVAL);
	assert_int_equal(form_cookie("ap_session=a,b", "ap_session", out, sizeof(out)), AP_EINVAL);
	assert_int_equal(form_cookie("ap_session=abcdef", "ap_session", out, 4), AP_ETOOBIG);
}

static void test_form_escape(void **state)
{
	ap_buf b = AP_BUF_INIT(256);

	(void)state;
	assert_int_equal(form_escape(&b, "http://h:1/a b?c=d&e~"), 0);
	assert_string_equal(ap_buf_str(&b), "http%3A%2F%2Fh%3A1%2Fa%20b%3Fc%3Dd%26e~");
	ap_buf_release(&b);
}

static void test_nonce_once_and_expiry(void **state)
{
	nonce_store *s;
	char a[NONCE_HEX + 1], b[NONCE_HEX + 1];

	(void)state;
	assert_int_equal(nonce_store_new(&s, 4), 0);
	assert_int_equal(nonce_issue(s, "setup", 3600000, T0, a), 0);
	assert_int_equal(nonce_issue(s, "setup", 1000, T0, b), 0);
	assert_int_equal(strlen(a), NONCE_HEX);
	assert_string_not_equal(a, b);
	/* Another kind, a malformed value, an unknown one: refused. */
	assert_int_equal(nonce_redeem(s, "login", a, T0), AP_ENOTFOUND);
	assert_int_equal(nonce_redeem(s, "setup", "abc", T0), AP_ENOTFOUND);
	assert_int_equal(nonce_redeem(s, "setup", NULL, T0), AP_ENOTFOUND);
	/* Within the hour: once. */
	assert_int_equal(nonce_redeem(s, "setup", a, T0 + 3599999), 0);
	assert_int_equal(nonce_redeem(s, "setup", a, T0 + 3599999), AP_ENOTFOUND);
	/* Expired: refused, and gone. */
	assert_int_equal(nonce_redeem(s, "setup", b, T0 + 1000), AP_ETIMEOUT);
	assert_int_equal(nonce_redeem(s, "setup", b, T0), AP_ENOTFOUND);
	nonce_store_free(s);
}

static void test_nonce_store_is_capped(void **state)
{
	nonce_store *s;
	char first[NONCE_HEX + 1], v[NONCE_HEX + 1];

	(void)state;
	assert_int_equal(nonce_store_new(&s, 2), 0);
	assert_int_equal(nonce_issue(s, "k", 60000, T0, first), 0);
	for (int i = 1; i <= 2; i++)
		assert_int_equal(nonce_issue(s, "k", 60000, T0 + i, v), 0);
	/* The oldest made room. */
	assert_int_equal(nonce_redeem(s, "k", first, T0 + 10), AP_ENOTFOUND);
	assert_int_equal(nonce_redeem(s, "k", v, T0 + 10), 0);
	nonce_store_free(s);
	assert_int_equal(nonce_store_new(&s, 0), AP_EINVAL);
}

static void test_session_csrf_and_expiry(void **state)
{
	sess_store *s;
	char id[SESS_HEX + 1], other[SESS_HEX + 1];
	sess_info info;
	char *tok = NULL;

	(void)state;
	assert_int_equal(sess_store_new(&s, 8), 0);
	assert_int_equal(sess_create(s, "alice", "ghu_token", false, 60000, T0, id), 0);
	assert_int_equal(sess_create(s, "operator", NULL, true, 60000, T0, other), 0);
	assert_int_equal(sess_get(s, id, T0 + 1, &info), 0);
	assert_string_equal(info.login, "alice");
	assert_false(info.operator);
	assert_int_equal(strlen(info.csrf), SESS_HEX);
	/* The CSRF token is bound to its session. */
	assert_true(sess_csrf_ok(s, id, info.csrf, T0 + 1));
	assert_false(sess_csrf_ok(s, other, info.csrf, T0 + 1));
	assert_false(sess_csrf_ok(s, id, "", T0 + 1));
	assert_false(sess_csrf_ok(s, id, NULL, T0 + 1));
	assert_int_equal(sess_token(s, id, T0 + 1, &tok), 0);
	assert_string_equal(tok, "ghu_token");
	free(tok);
	assert_int_equal(sess_token(s, other, T0 + 1, &tok), AP_ENOTFOUND);
	/* Expired: gone, with its CSRF token. */
	assert_int_equal(sess_get(s, id, T0 + 60000, &info), AP_ENOTFOUND);
	assert_false(sess_csrf_ok(s, id, info.csrf, T0 + 1));
	/* Ended. */
	sess_end(s, other);
	assert_int_equal(sess_get(s, other, T0 + 1, &info), AP_ENOTFOUND);
	assert_int_equal(sess_get(s, "nope", T0, &info), AP_ENOTFOUND);
	assert_int_equal(sess_create(s, "", NULL, false, 1, T0, id), AP_EINVAL);
	sess_store_free(s);
}

static void test_session_permission_cache(void **state)
{
	sess_store *s;
	char id[SESS_HEX + 1];
	bool yes = true;

	(void)state;
	assert_int_equal(sess_store_new(&s, 2), 0);
	assert_int_equal(sess_create(s, "bob", "t", false, 3600000, T0, id), 0);
	assert_int_equal(sess_perm_get(s, id, "o/r", T0, &yes), AP_ENOTFOUND);
	sess_perm_put(s, id, "o/r", false, T0);
	assert_int_equal(sess_perm_get(s, id, "o/r", T0 + 1, &yes), 0);
	assert_false(yes);
	/* Believed for five minutes, then asked again. */
	assert_int_equal(sess_perm_get(s, id, "o/r", T0 + SESS_PERM_TTL_MS, &yes), AP_ENOTFOUND);
	/* Many repositories: the oldest answers make room, nothing grows. */
	for (int i = 0; i < 100; i++) {
		char repo[32];

		snprintf(repo, sizeof(repo), "o/r%d", i);
		sess_perm_put(s, id, repo, true, T0 + i);
	}
	assert_int_equal(sess_perm_get(s, id, "o/r99", T0 + 100, &yes), 0);
	assert_true(yes);
	assert_int_equal(sess_perm_get(s, id, "o/r0", T0 + 100, &yes), AP_ENOTFOUND);
	sess_store_free(s);
}

static void test_session_table_is_capped(void **state)
{
	sess_store *s;
	char a[SESS_HEX + 1], b[SESS_HEX + 1], c[SESS_HEX + 1];
	sess_info info;

	(void)state;
	assert_int_equal(sess_store_new(&s, 2), 0);
	assert_int_equal(sess_create(s, "a", NULL, false, 1000, T0, a), 0);
	assert_int_equal(sess_create(s, "b", NULL, false, 5000, T0, b), 0);
	assert_int_equal(sess_create(s, "c", NULL, false, 5000, T0, c), 0);
	/* The one closest to expiry made room. */
	assert_int_equal(sess_get(s, a, T0, &info), AP_ENOTFOUND);
	assert_int_equal(sess_get(s, b, T0, &info), 0);
	assert_int_equal(sess_get(s, c, T0, &info), 0);
	sess_store_free(s);
}

static void test_one_login_cannot_push_out_others(void **state)
{
	sess_store *s;
	char alice[SESS_HEX + 1], ids[40][SESS_HEX + 1], op[3][SESS_HEX + 1];
	sess_info info;
	int live = 0;

	(void)state;
	assert_int_equal(sess_store_new(&s, 16), 0);
	assert_int_equal(sess_create(s, "alice", "tok-a", false, 60000, T0, alice), 0);
	/* Mallory signs in 40 times, each later (so each would outlive Alice's). */
	for (int i = 0; i < 40; i++)
		assert_int_equal(
		    sess_create(s, "mallory", "tok-m", false, 60000 + i * 1000, T0, ids[i]), 0);
	assert_int_equal(sess_get(s, alice, T0, &info), 0);
	assert_string_equal(info.login, "alice");
	for (int i = 0; i < 40; i++)
		live += sess_get(s, ids[i], T0, &info) == 0;
	assert_int_equal(live, SESS_PER_LOGIN);
	/* Her newest are the ones kept. */
	assert_int_equal(sess_get(s, ids[39], T0, &info), 0);
	assert_int_equal(sess_get(s, ids[39 - SESS_PER_LOGIN], T0, &info), AP_ENOTFOUND);
	/* Sessions without a token (the loopback operator's) are not counted per login. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(sess_create(s, "operator", NULL, true, 60000, T0, op[i]), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(sess_get(s, op[i], T0, &info), 0);
	sess_store_free(s);
}

/* The Content-Security-Policy names GITHUB_URL; one too long for it stops start-up with a
 * sentence instead of sending a cut policy (which would name another origin). */
static void test_long_github_url_stops_the_console(void **state)
{
	static char url[1100];
	console_config cfg = {.web_url = url, .sign_in = true, .session_ms = 60000};
	console *c = NULL;

	(void)state;
	memset(url, 'a', sizeof(url) - 1);
	memcpy(url, "https://", 8);
	assert_int_equal(console_new(&c, &cfg), AP_EINVAL);
	assert_null(c);
	assert_non_null(strstr(ap_error_last(), "GITHUB_URL is too long"));
	ap_error_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_form_get_decodes),
	    cmocka_unit_test(test_form_get_refuses_bad_values),
	    cmocka_unit_test(test_form_cookie),
	    cmocka_unit_test(test_form_escape),
	    cmocka_unit_test(test_nonce_once_and_expiry),
	    cmocka_unit_test(test_nonce_store_is_capped),
	    cmocka_unit_test(test_session_csrf_and_expiry),
	    cmocka_unit_test(test_session_permission_cache),
	    cmocka_unit_test(test_session_table_is_capped),
	    cmocka_unit_test(test_one_login_cannot_push_out_others),
	    cmocka_unit_test(test_long_github_url_stops_the_console),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
