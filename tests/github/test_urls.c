/* SPDX-License-Identifier: MIT */
/* tests/github/test_urls.c - GITHUB_URL and GITHUB_API_URL derived from each other, and the
 * URLs built from them (git on the web host, the new-App page, the installation page). */
#include "common/config.h"
#include "common/err.h"
#include "github/urls.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void urls_of(const char *web, const char *api, gh_urls *u, int want)
{
	ap_config *cfg = NULL;

	assert_int_equal(cfg_new_empty(&cfg), 0);
	if (web)
		cfg_set(cfg, "GITHUB_URL", web);
	if (api)
		cfg_set(cfg, "GITHUB_API_URL", api);
	assert_int_equal(gh_urls_get(cfg, u), want);
	cfg_free(cfg);
}

static void test_urls_derived(void **state)
{
	gh_urls u;

	(void)state;
	urls_of(NULL, NULL, &u, 0);
	assert_string_equal(u.web, "https://github.com");
	assert_string_equal(u.api, "https://api.github.com");
	urls_of("https://github.com/", NULL, &u, 0);
	assert_string_equal(u.api, "https://api.github.com");
	urls_of(NULL, "https://api.github.com", &u, 0);
	assert_string_equal(u.web, "https://github.com");
	/* GitHub Enterprise Server, either setting alone */
	urls_of("https://ghe.example.com/", NULL, &u, 0);
	assert_string_equal(u.web, "https://ghe.example.com");
	assert_string_equal(u.api, "https://ghe.example.com/api/v3");
	urls_of(NULL, "https://ghe.example.com/api/v3/", &u, 0);
	assert_string_equal(u.web, "https://ghe.example.com");
	assert_string_equal(u.api, "https://ghe.example.com/api/v3");
	/* both: as given */
	urls_of("https://ghe.example.com", "https://api.ghe.example.com", &u, 0);
	assert_string_equal(u.web, "https://ghe.example.com");
	assert_string_equal(u.api, "https://api.ghe.example.com");
	/* a stand-in serving the API at its root is its own web host */
	urls_of(NULL, "http://127.0.0.1:8080", &u, 0);
	assert_string_equal(u.web, "http://127.0.0.1:8080");
	assert_string_equal(u.api, "http://127.0.0.1:8080");
}

static void test_urls_refused(void **state)
{
	static const char *const bad[] = {"ghe.example.com",
					  "ftp://ghe.example.com",
					  "https://user:pw@ghe.example.com",
					  "https://",
					  "https://ghe.example.com/?x=1",
					  "https://ghe.example.com/#x",
					  "https://ghe example.com"};
	gh_urls u;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		urls_of(bad[i], NULL, &u, AP_EINVAL);
		assert_non_null(strstr(ap_error_last(), "GITHUB_URL"));
		urls_of(NULL, bad[i], &u, AP_EINVAL);
		assert_non_null(strstr(ap_error_last(), "GITHUB_API_URL"));
	}
}

static void test_urls_built(void **state)
{
	gh_urls u;
	char buf[600], tiny[20];

	(void)state;
	urls_of("https://ghe.example.com", NULL, &u, 0);
	assert_int_equal(gh_urls_git(&u, "octo/calc", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "https://ghe.example.com/octo/calc.git");
	assert_int_equal(gh_urls_git(&u, "o.k/my_repo-1", buf, sizeof(buf)), 0);
	assert_int_equal(gh_urls_git(&u, "octo/../x", buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_git(&u, "octo", buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_git(&u, "octo/..", buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_git(&u, "/calc", buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_git(&u, "a/b@evil.com/c", buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_git(&u, NULL, buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_git(&u, "octo/calc", tiny, sizeof(tiny)), AP_ETOOBIG);
	assert_int_equal(gh_urls_new_app(&u, NULL, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "https://ghe.example.com/settings/apps/new");
	assert_int_equal(gh_urls_new_app(&u, "acme", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "https://ghe.example.com/organizations/acme/settings/apps/new");
	assert_int_equal(gh_urls_new_app(&u, "a/b", buf, sizeof(buf)), AP_EINVAL);
	assert_int_equal(gh_urls_install(&u, "autopatch", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "https://ghe.example.com/apps/autopatch/installations/new");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_urls_derived),
	    cmocka_unit_test(test_urls_refused),
	    cmocka_unit_test(test_urls_built),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
