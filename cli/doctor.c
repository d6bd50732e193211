/* SPDX-License-Identifier: MIT */
/* github/doctor.c - `autopatch doctor`: one ✓/✗ line per thing a working install needs
 * (configuration, private key, JWT accepted, installations, Docker, sandbox image, model),
 * each ✗ followed by the sentence that says how to fix it. Exit 0 only if every check passes.
 *
 * Every network check has a short deadline so a broken setting is reported, not waited on. */
#include "cli/commands.h"

#include "github/api.h"
#include "github/app.h"
#include "common/buf.h"
#include "common/err.h"
#include "github/jwt.h"
#include "github/rest.h"
#include "sandbox/sandbox.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_TIMEOUT_MS 10000L

struct report {
	int failed;
};

static void pass(struct report *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct report *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pass(struct report *r, const char *name, const char *fmt, ...)
{
	va_list ap;

	(void)r;
	printf("\xe2\x9c\x93 %s", name);
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
}

static void fail(struct report *r, const char *name, const char *fmt, ...)
{
	va_list ap;

	r->failed++;
	printf("\xe2\x9c\x97 %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* Strip a trailing period so "problem. Fix." reads well when a sentence is embedded. */
static const char *last_error(void)
{
	static __thread char msg[1100];
	size_t n;

	snprintf(msg, sizeof(msg), "%s", ap_error_last());
	n = strlen(msg);
	while (n && (msg[n - 1] == '.' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	return msg;
}

static void check_config(struct report *r, ap_config *cfg)
{
	const char *id = cfg_str(cfg, "APP_ID");
	const char *url = cfg_str(cfg, "GITHUB_API_URL");
	ap_buf why = AP_BUF_INIT(4096);

	if (!id)
		ap_buf_adds(&why, " APP_ID is not set. Set APP_ID in .env to the App ID shown on "
				  "the GitHub App's settings page.");
	else if (strspn(id, "0123456789") != strlen(id) && strncmp(id, "Iv", 2) != 0)
		ap_buf_addf(&why,
			    " APP_ID=%s is neither an App ID nor a client ID. Copy the App ID (a "
			    "number) from the GitHub App's settings page.",
			    id);
	if (!cfg_is_set(cfg, "PRIVATE_KEY_PATH") && !cfg_is_set(cfg, "PRIVATE_KEY"))
		ap_buf_adds(&why, " No private key is configured. Set PRIVATE_KEY_PATH to the .pem "
				  "file downloaded from the GitHub App's settings page (or "
				  "PRIVATE_KEY to its contents).");
	if (!cfg_is_set(cfg, "WEBHOOK_SECRET"))
		ap_buf_adds(&why, " WEBHOOK_SECRET is not set. Set it to the webhook secret "
				  "entered on the GitHub App's settings page (generate one with: "
				  "openssl rand -hex 32).");
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		ap_buf_addf(&why,
			    " GITHUB_API_URL=%s is not a URL. Use https://api.github.com, or "
			    "https://HOST/api/v3 for GitHub Enterprise Server.",
			    url);
	if (why.len)
		fail(r, "configuration", "%s", ap_buf_str(&why) + 1);
	else
		pass(r, "configuration", "APP_ID %s, API %s", id, url);
	ap_buf_release(&why);
}

static bool check_key(struct report *r, ap_config *cfg)
{
	gh_key *key = NULL;

	if (!cfg_is_set(cfg, "PRIVATE_KEY_PATH") && !cfg_is_set(cfg, "PRIVATE_KEY")) {
		fail(r, "private key",
		     "not configured. Set PRIVATE_KEY_PATH to the App's .pem file.");
		return false;
	}
	if (gh_key_load(&key, cfg)) {
		fail(r, "private key", "%s.", last_error());
		return false;
	}
	gh_key_free(key);
	pass(r, "private key", "RSA key loaded from %s",
	     cfg_is_set(cfg, "PRIVATE_KEY_PATH") ? cfg_str(cfg, "PRIVATE_KEY_PATH")
						 : "PRIVATE_KEY");
	return true;
}

static void check_github(struct report *r, ap_config *cfg, bool usable)
{
	gh_app *app = NULL;
	gh_rest *rest = NULL;
	cJSON *me = NULL, *inst = NULL, *it;
	const char *slug;
	ap_buf who = AP_BUF_INIT(1024);
	int rc, n;

	if (!usable || gh_app_new(&app, cfg)) {
		fail(r, "JWT accepted",
		     "not checked. Fix the configuration and private key lines first%s%s.",
		     usable ? ": " : "", usable ? last_error() : "");
		fail(r, "installations visible",
		     "not checked. Fix the configuration and private key lines above first.");
		return;
	}
	rc = gh_rest_new(&rest, cfg, gh_app_creds(app), 0);
	if (!rc)
		rc = gh_rest_call(rest, "GET", "/app", NULL, &me);
	if (rc == AP_EDENIED || rc == AP_ENOTFOUND) {
		fail(r, "JWT accepted",
		     "%s. Check that APP_ID is this App's ID, PRIVATE_KEY_PATH is this App's "
		     "current key (generate a new one on the App's settings page if unsure), and "
		     "that this machine's clock is right.",
		     last_error());
	} else if (rc) {
		fail(r, "JWT accepted",
		     "%s. Check GITHUB_API_URL and that this machine can reach it (proxy, "
		     "firewall, DNS).",
		     last_error());
	}
	if (rc) {
		fail(r, "installations visible", "not checked. Fix the JWT line above first.");
		goto out;
	}
	slug = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(me, "slug"));
	pass(r, "JWT accepted", "GitHub App \"%s\"", slug ? slug : "?");

	rc = gh_rest_get_all(rest, "/app/installations", 1000, &inst);
	if (rc) {
		fail(r, "installations visible",
		     "%s. Check GITHUB_API_URL and the App's permissions.", last_error());
		goto out;
	}
	n = cJSON_GetArraySize(inst);
	if (n == 0) {
		fail(r, "installations visible",
		     "the App is installed nowhere. Install it on the repositories it should fix "
		     "(the App's public page, \"Install App\").");
		goto out;
	}
	cJSON_ArrayForEach(it, inst)
	{
		const char *login = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(it, "account"), "login"));

		if (who.len > 200)
			break;
		ap_buf_addf(&who, "%s%s", who.len ? ", " : "", login ? login : "?");
	}
	pass(r, "installations visible", "%d (%s)", n, ap_buf_str(&who));
out:
	ap_buf_release(&who);
	cJSON_Delete(me);
	cJSON_Delete(inst);
	gh_rest_free(rest);
	gh_app_free(app);
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

/* GET on the Docker socket; the HTTP status, or -1 with cerr filled. */
static long docker_get(const char *sock, const char *path, char *cerr)
{
	char url[600];
	long status = -1;
	CURL *c = curl_easy_init();

	if (!c)
		return -1;
	snprintf(url, sizeof(url), "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, CHECK_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	return status;
}

static void check_docker(struct report *r, ap_config *cfg)
{
	const char *host = cfg_str(cfg, "DOCKER_HOST");
	const char *image = cfg_str(cfg, "AUTOPATCH_SANDBOX_IMAGE");
	char cerr[CURL_ERROR_SIZE] = "", path[512];
	sbx_engine *e = NULL;
	char *esc;
	long st;

	if (sbx_engine_new(&e, cfg)) {
		fail(r, "Docker reachable",
		     "%s. Start dockerd (or point DOCKER_HOST at it) and make sure this user may "
		     "use its socket (the docker group).",
		     last_error());
		fail(r, "sandbox image present", "not checked. Fix the Docker line above first.");
		return;
	}
	sbx_engine_free(e);
	pass(r, "Docker reachable", "%s", host);
	if (strncmp(host, "unix://", 7) != 0) {
		fail(r, "sandbox image present",
		     "DOCKER_HOST=%s is not a unix socket. Use unix:///var/run/docker.sock.", host);
		return;
	}
	esc = curl_easy_escape(NULL, image, 0);
	snprintf(path, sizeof(path), "/images/%s/json", esc ? esc : "");
	curl_free(esc);
	st = docker_get(host + 7, path, cerr);
	if (st == 200)
		pass(r, "sandbox image present", "%s", image);
	else if (st == 404)
		fail(r, "sandbox image present",
		     "%s is not in Docker. Build it with: docker build -t %s deploy/sandbox "
		     "(scripts/bootstrap.sh does this), or set AUTOPATCH_SANDBOX_IMAGE.",
		     image, image);
	else
		fail(r, "sandbox image present",
		     "asking Docker about %s failed (%s). Check that dockerd is healthy.", image,
		     cerr[0] ? cerr : "unexpected answer");
}

static void check_model(struct report *r, ap_config *cfg)
{
	const char *provider = cfg_str(cfg, "AUTOPATCH_LLM_PROVIDER");
	bool anthropic = strcmp(provider, "anthropic") == 0;
	const char *base = cfg_str(cfg, "AUTOPATCH_LLM_BASE_URL");
	const char *key = cfg_str(cfg, "AUTOPATCH_LLM_API_KEY");
	struct curl_slist *h = NULL;
	char cerr[CURL_ERROR_SIZE] = "";
	ap_buf url = AP_BUF_INIT(2048), hdr = AP_BUF_INIT(4096);
	long status = 0;
	size_t n;
	CURL *c;

	if (!anthropic && strcmp(provider, "openai") != 0) {
		fail(r, "model endpoint reachable",
		     "AUTOPATCH_LLM_PROVIDER=%s is unknown. Use openai (any OpenAI-compatible "
		     "server) or anthropic.",
		     provider);
		return;
	}
	if (!key)
		key = cfg_str(cfg, anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
	if (!base)
		base = anthropic ? "https://api.anthropic.com" : "https://api.openai.com/v1";
	n = strlen(base);
	while (n && base[n - 1] == '/')
		n--;
	if (anthropic)
		ap_buf_addf(&url, "%.*s%s/models", (int)n, base,
			    n >= 3 && strncmp(base + n - 3, "/v1", 3) == 0 ? "" : "/v1");
	else
		ap_buf_addf(&url, "%.*s/models", (int)n, base);
	if (key && anthropic) {
		ap_buf_addf(&hdr, "x-api-key: %s", key);
		h = curl_slist_append(h, ap_buf_str(&hdr));
		h = curl_slist_append(h, "anthropic-version: 2023-06-01");
	} else if (key) {
		ap_buf_addf(&hdr, "Authorization: Bearer %s", key);
		h = curl_slist_append(h, ap_buf_str(&hdr));
	}
	c = curl_easy_init();
	if (!c) {
		fail(r, "model endpoint reachable", "out of memory.");
		goto out;
	}
	curl_easy_setopt(c, CURLOPT_URL, ap_buf_str(&url));
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, CHECK_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "autopatch-doctor");
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	if (status >= 200 && status < 300)
		pass(r, "model endpoint reachable", "%s (%s)", ap_buf_str(&url), provider);
	else if (status == 401 || status == 403)
		fail(r, "model endpoint reachable",
		     "%s refused the API key (HTTP %ld). Set AUTOPATCH_LLM_API_KEY (or %s) to a "
		     "valid key for this endpoint.",
		     ap_buf_str(&url), status, anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
	else if (status)
		fail(r, "model endpoint reachable",
		     "%s answered HTTP %ld. Check AUTOPATCH_LLM_BASE_URL (for OpenAI-compatible "
		     "servers it usually ends in /v1) and AUTOPATCH_LLM_PROVIDER.",
		     ap_buf_str(&url), status);
	else
		fail(r, "model endpoint reachable",
		     "cannot reach %s (%s). Start the model server or fix AUTOPATCH_LLM_BASE_URL.",
		     ap_buf_str(&url), cerr[0] ? cerr : "no answer");
out:
	curl_slist_free_all(h);
	if (hdr.data)
		memset(hdr.data, 0, hdr.len);
	ap_buf_release(&hdr);
	ap_buf_release(&url);
}

int doctor_main(int argc, char **argv, ap_config *cfg)
{
	struct report r = {0};
	bool key_ok;

	if (argc > 1) {
		fprintf(stderr, "usage: autopatch doctor (takes no arguments; %s)\n", argv[1]);
		return 2;
	}
	/* Diagnose quickly: one retry and a short deadline instead of the server's patience. */
	if (!cfg_is_set(cfg, "AUTOPATCH_GH_DEADLINE_S"))
		cfg_set(cfg, "AUTOPATCH_GH_DEADLINE_S", "15");
	if (!cfg_is_set(cfg, "AUTOPATCH_GH_RETRIES"))
		cfg_set(cfg, "AUTOPATCH_GH_RETRIES", "1");
	if (!cfg_is_set(cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S"))
		cfg_set(cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S", "5");
	curl_global_init(CURL_GLOBAL_DEFAULT);

	check_config(&r, cfg);
	key_ok = check_key(&r, cfg);
	check_github(&r, cfg, key_ok && cfg_is_set(cfg, "APP_ID"));
	check_docker(&r, cfg);
	check_model(&r, cfg);
	fflush(stdout);
	if (r.failed)
		printf("%d check%s failed.\n", r.failed, r.failed == 1 ? "" : "s");
	else
		printf("All checks passed.\n");
	return r.failed ? 1 : 0;
}
