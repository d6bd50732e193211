/* SPDX-License-Identifier: MIT */
/* tests/server/test_registration.c - the App registration (server/registration.c): what it
 * refuses before starting, the manifest it posts (this server's URLs, deploy/app.yml's
 * permissions with Members read for the console's org: entries), and the callback over a
 * fake code conversion: one-time state, credentials file, the App put in use. */
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "github/urls.h"
#include "server/registration.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static int converted, registered;
static char got_id[32], got_client[64];

static int fake_convert(void *ud, const char *code, cJSON **out)
{
	(void)ud;
	converted++;
	if (strcmp(code, "good") != 0)
		return ap_error_set(AP_ENOTFOUND, "HTTP 404: the code is unknown");
	*out = cJSON_Parse("{\"id\":77,\"slug\":\"ap\",\"html_url\":\"https://gh/apps/ap\","
			   "\"pem\":\"-----BEGIN KEY-----\\nabc\\n-----END KEY-----\\n\","
			   "\"webhook_secret\":\"whs\",\"client_id\":\"Iv1.c\","
			   "\"client_secret\":\"cs\"}");
	return 0;
}

static void fake_registered(void *ud, const reg_app *app)
{
	(void)ud;
	registered++;
	snprintf(got_id, sizeof(got_id), "%s", app->app_id);
	snprintf(got_client, sizeof(got_client), "%s", app->client_id);
}

/* GitHub's pages as the server builds them (cli/serve.c): github/urls.h over GITHUB_URL. */
static const gh_urls test_urls = {.web = "https://gh", .api = "https://gh/api/v3"};

static int real_new_app_url(void *ud, const char *org, char *buf, size_t n)
{
	(void)ud;
	return gh_urls_new_app(&test_urls, org, buf, n);
}

static int real_install_url(void *ud, const char *slug, char *buf, size_t n)
{
	(void)ud;
	return gh_urls_install(&test_urls, slug, buf, n);
}

static reg *make(bool offered, const char *public_url, const char *creds)
{
	reg_config cfg = {
	    .offered = offered,
	    .public_url = public_url,
	    .console_url = "http://127.0.0.1:9464",
	    .web_url = "https://gh",
	    .webhook_path = "/hook",
	    .credentials_file = creds,
	    .convert = fake_convert,
	    .new_app_url = real_new_app_url,
	    .install_url = real_install_url,
	    .registered = fake_registered,
	};
	reg *r = NULL;

	assert_int_equal(reg_new(&r, &cfg), 0);
	return r;
}

static void test_refusals_before_starting(void **state)
{
	reg *closed = make(false, "https://ap.example.org", "/tmp/x");
	reg *no_url = make(true, NULL, "/tmp/x");
	reg *r = make(true, "https://ap.example.org", "/tmp/x");
	reg_form f;
	flow_answer a = {0};

	(void)state;
	assert_int_not_equal(reg_begin(closed, NULL, &f, &a), 0);
	assert_int_equal(a.status, 403);
	assert_null(f.manifest);
	memset(&a, 0, sizeof(a));
	assert_int_not_equal(reg_begin(no_url, NULL, &f, &a), 0);
	assert_int_equal(a.status, 409);
	assert_non_null(strstr(a.todo, "AUTOPATCH_PUBLIC_URL"));
	memset(&a, 0, sizeof(a));
	assert_int_not_equal(reg_begin(r, "acme\"><script>", &f, &a), 0);
	assert_int_equal(a.status, 400);
	/* The callback is refused on a console that needs sign-in, whatever it carries. */
	memset(&a, 0, sizeof(a));
	reg_finish(closed, "good", "x", &a);
	assert_int_equal(a.status, 403);
	assert_true(reg_org_ok("acme-1"));
	assert_false(reg_org_ok(""));
	assert_false(reg_org_ok("a_b"));
	assert_false(reg_org_ok("0123456789012345678901234567890123456789"));
	reg_free(closed);
	reg_free(no_url);
	reg_free(r);
	reg_free(NULL);
}

static void test_long_public_url_is_refused_not_cut(void **state)
{
	static char url[FLOW_URL_MAX + 16];
	reg *r;
	reg_form f;
	flow_answer a = {0};

	(void)state;
	memcpy(url, "https://", 8);
	memset(url + 8, 'a', sizeof(url) - 9);
	url[sizeof(url) - 1] = '\0';
	r = make(true, url, "/tmp/x");
	/* A cut webhook URL would send GitHub's deliveries elsewhere. */
	assert_int_equal(reg_begin(r, NULL, &f, &a), AP_ETOOBIG);
	assert_int_equal(a.status, 500);
	assert_null(f.manifest);
	reg_free(r);
	ap_error_clear();
}

static void test_manifest_has_urls_and_members_read(void **state)
{
	reg *r = make(true, "https://ap.example.org", "/tmp/x");
	reg_form f;
	flow_answer a = {0};
	cJSON *m, *perms, *cb;

	(void)state;
	assert_int_equal(reg_begin(r, "acme", &f, &a), 0);
	assert_int_equal(strncmp(f.action, "https://gh/organizations/acme/settings/apps/new?state=",
				 strlen("https://gh/organizations/acme/settings/apps/new?state=")),
			 0);
	assert_string_equal(f.hook, "https://ap.example.org/hook");
	m = cJSON_Parse(f.manifest);
	assert_non_null(m);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(
				cJSON_GetObjectItem(m, "hook_attributes"), "url")),
			    "https://ap.example.org/hook");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(m, "redirect_url")),
			    "http://127.0.0.1:9464/setup/callback");
	cb = cJSON_GetObjectItem(m, "callback_urls");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(cb, 0)),
			    "http://127.0.0.1:9464/login/callback");
	perms = cJSON_GetObjectItem(m, "default_permissions");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(perms, "members")), "read");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(perms, "issues")), "write");
	cJSON_Delete(m);
	free(f.manifest);
	reg_free(r);
}

/* The state in a form's action. */
static const char *state_of(const reg_form *f)
{
	return strstr(f->action, "state=") + 6;
}

static void test_callback(void **state)
{
	char dir[] = "/tmp/ap-reg-XXXXXX", path[64];
	reg *r;
	reg_form f;
	flow_answer a = {0};
	ap_buf text = AP_BUF_INIT(65536);
	struct stat sb;
	char st[80];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/creds.env", dir);
	r = make(true, "https://ap.example.org", path);
	converted = registered = 0;
	/* A state this server never issued: refused before GitHub is asked. */
	reg_finish(r, "good", "f00d", &a);
	assert_int_equal(a.status, 400);
	assert_string_equal(a.title, "Unknown registration");
	assert_int_equal(converted, 0);
	/* A code GitHub does not know: 502 that says it expired. */
	assert_int_equal(reg_begin(r, NULL, &f, &a), 0);
	free(f.manifest);
	snprintf(st, sizeof(st), "%s", state_of(&f));
	memset(&a, 0, sizeof(a));
	reg_finish(r, "stale", st, &a);
	assert_int_equal(a.status, 502);
	assert_non_null(strstr(a.todo, "the code expired"));
	/* The state was spent by that try. */
	memset(&a, 0, sizeof(a));
	reg_finish(r, "good", st, &a);
	assert_int_equal(a.status, 400);
	/* A good one: stored 0600, put in use, on to the installation page. */
	assert_int_equal(reg_begin(r, NULL, &f, &a), 0);
	free(f.manifest);
	snprintf(st, sizeof(st), "%s", state_of(&f));
	memset(&a, 0, sizeof(a));
	reg_finish(r, "good", st, &a);
	assert_int_equal(a.status, 303);
	assert_string_equal(a.location, "https://gh/apps/ap/installations/new");
	assert_int_equal(registered, 1);
	assert_string_equal(got_id, "77");
	assert_string_equal(got_client, "Iv1.c");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(fs_read_file(&text, path, 0), 0);
	assert_non_null(strstr(ap_buf_str(&text), "APP_ID=\"77\"\n"));
	assert_non_null(strstr(ap_buf_str(&text), "PRIVATE_KEY=\"-----BEGIN KEY-----\\nabc\\n"));
	assert_non_null(strstr(ap_buf_str(&text), "GITHUB_CLIENT_SECRET=\"cs\"\n"));
	ap_buf_release(&text);
	unlink(path);
	rmdir(dir);
	reg_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refusals_before_starting),
	    cmocka_unit_test(test_manifest_has_urls_and_members_read),
	    cmocka_unit_test(test_long_public_url_is_refused_not_cut),
	    cmocka_unit_test(test_callback),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
