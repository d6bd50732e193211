/* SPDX-License-Identifier: MIT */
/* github/oauth.c - manifest conversion and user sign-in (see oauth.h). */
#include "github/oauth.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/httpc.h"
#include "common/redact.h"
#include "github/api.h"
#include "github/rest.h"
#include "github/urls.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OAUTH_RESPONSE_CAP (64 * 1024)
#define OAUTH_TIMEOUT_MS   30000

static bool code_ok(const char *code)
{
	size_t n = 0;

	for (; code && code[n]; n++)
		if (n >= 100 ||
		    !(code[n] == '-' || code[n] == '_' || (code[n] >= '0' && code[n] <= '9') ||
		      (code[n] >= 'a' && code[n] <= 'z') || (code[n] >= 'A' && code[n] <= 'Z')))
			return false;
	return n > 0;
}

static char *dup_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static bool has_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) && v->valuestring[0];
}

int gh_manifest_convert(const ap_config *cfg, const char *code, cJSON **out)
{
	char path[160];
	gh_rest *r = NULL;
	cJSON *o = NULL;
	const cJSON *id;
	int rc;

	*out = NULL;
	if (!code_ok(code))
		return ap_error_set(AP_EINVAL, "the registration code is not one GitHub issues");
	if ((rc = ap_fmt(path, sizeof(path), "/app-manifests/%s/conversions", code)) ||
	    (rc = gh_rest_new_anon(&r, cfg)))
		return rc;
	rc = gh_rest_call(r, "POST", path, NULL, &o);
	gh_rest_free(r);
	if (rc)
		return rc;
	id = cJSON_GetObjectItemCaseSensitive(o, "id");
	if (!cJSON_IsNumber(id) || id->valuedouble < 1 || !has_str(o, "pem") ||
	    !has_str(o, "webhook_secret")) {
		cJSON_Delete(o);
		return ap_error_set(AP_EHTTP,
				    "GitHub's answer to the conversion lacks the App's id, "
				    "key or webhook secret");
	}
	*out = o;
	return 0;
}

/* name=value&... with every value percent-encoded. */
static int form_add(ap_buf *b, CURL *h, const char *name, const char *value)
{
	char *esc = curl_easy_escape(h, value ? value : "", 0);
	int rc;

	if (!esc)
		return ap_error_set(AP_ENOMEM, "out of memory");
	rc = ap_buf_addf(b, "%s%s=%s", b->len ? "&" : "", name, esc);
	curl_free(esc);
	return rc;
}

int gh_oauth_exchange(const ap_config *cfg, const char *client_id, const char *client_secret,
		      const char *code, const char *redirect_uri, char **token)
{
	ap_buf url = AP_BUF_INIT(4096), form = AP_BUF_INIT(8192),
	       resp = AP_BUF_INIT(OAUTH_RESPONSE_CAP);
	httpc_body sink = HTTPC_BODY_INIT(&resp);
	struct curl_slist *hl = NULL;
	const char *web;
	gh_urls urls;
	cJSON *o = NULL;
	CURL *h = NULL;
	CURLcode cc;
	long status = 0;
	int rc;

	*token = NULL;
	if (!code_ok(code) || !client_id || !client_secret)
		return ap_error_set(AP_EINVAL, "the sign-in code is not one GitHub issues");
	if ((rc = gh_urls_get(cfg, &urls)))
		return rc;
	web = urls.web;
	if ((rc = httpc_global_init()))
		return rc;
	h = curl_easy_init();
	hl = curl_slist_append(NULL, "Accept: application/json");
	if (!h || !hl) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = ap_buf_addf(&url, "%s/login/oauth/access_token", web)) ||
	    (rc = form_add(&form, h, "client_id", client_id)) ||
	    (rc = form_add(&form, h, "client_secret", client_secret)) ||
	    (rc = form_add(&form, h, "code", code)) ||
	    (redirect_uri && (rc = form_add(&form, h, "redirect_uri", redirect_uri))))
		goto out;
	curl_easy_setopt(h, CURLOPT_URL, ap_buf_str(&url));
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, ap_buf_str(&form));
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)form.len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "autopatch/0.1 (+self-hosted GitHub App)");
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)OAUTH_TIMEOUT_MS);
	httpc_body_sink(h, &sink);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (cc != CURLE_OK || sink.rc) {
		rc = ap_error_set(AP_EUNAVAIL, "cannot reach %s to finish the sign-in: %s", web,
				  sink.rc ? "the answer is too large" : curl_easy_strerror(cc));
		goto out;
	}
	o = cJSON_ParseWithLength(ap_buf_str(&resp), resp.len);
	if (status == 200 && o && cJSON_IsString(cJSON_GetObjectItem(o, "access_token"))) {
		*token = strdup(cJSON_GetObjectItem(o, "access_token")->valuestring);
		rc = *token ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
	} else {
		const cJSON *d = cJSON_GetObjectItem(o, "error_description");
		char *why = redact_str(cJSON_IsString(d) ? d->valuestring : "no access token");

		rc = ap_error_set(AP_EDENIED, "GitHub refused the sign-in (HTTP %ld): %s", status,
				  why ? why : "");
		free(why);
	}
out:
	if (form.data)
		memset(form.data, 0, form.len);
	if (resp.data)
		memset(resp.data, 0, resp.len);
	cJSON_Delete(o);
	curl_slist_free_all(hl);
	curl_easy_cleanup(h);
	ap_buf_release(&url);
	ap_buf_release(&form);
	ap_buf_release(&resp);
	return rc;
}

int gh_user_login(const ap_config *cfg, const char *token, char **login)
{
	gh_rest *r = NULL;
	cJSON *o = NULL;
	int rc;

	*login = NULL;
	if ((rc = gh_rest_new_token(&r, cfg, token)))
		return rc;
	rc = gh_rest_call(r, "GET", "/user", NULL, &o);
	gh_rest_free(r);
	if (rc)
		return rc;
	*login = dup_str(o, "login");
	cJSON_Delete(o);
	return *login ? 0 : ap_error_set(AP_EHTTP, "GitHub's /user answer has no login");
}

int gh_user_can_push(const ap_config *cfg, const char *token, const char *repo, bool *yes)
{
	gh_repo info = {0};
	gh_rest *r = NULL;
	int rc;

	*yes = false;
	if ((rc = gh_rest_new_token(&r, cfg, token)))
		return rc;
	rc = gh_repo_get(r, repo, &info);
	gh_rest_free(r);
	if (rc == AP_ENOTFOUND || rc == AP_EDENIED) {
		ap_error_clear();
		return 0;
	}
	if (!rc)
		*yes = info.can_push;
	gh_repo_release(&info);
	return rc;
}

/* An organization login: letters, digits and hyphens, at most 39. */
static bool org_ok(const char *org)
{
	size_t n = org ? strspn(org, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "0123456789-")
		       : 0;

	return n > 0 && n <= 39 && org[n] == '\0';
}

int gh_user_in_org(const ap_config *cfg, const char *token, const char *org, bool *yes)
{
	char path[96];
	gh_rest *r = NULL;
	cJSON *o = NULL;
	int rc;

	*yes = false;
	if (!org_ok(org))
		return ap_error_set(AP_EINVAL, "\"%.60s\" is not an organization's login",
				    org ? org : "");
	if ((rc = ap_fmt(path, sizeof(path), "/user/memberships/orgs/%s", org)) ||
	    (rc = gh_rest_new_token(&r, cfg, token)))
		return rc;
	rc = gh_rest_call(r, "GET", path, NULL, &o);
	gh_rest_free(r);
	if (rc == AP_ENOTFOUND) {
		ap_error_clear();
		return 0;
	}
	if (rc == AP_EDENIED) {
		char why[AP_ERROR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", ap_error_last());
		return ap_error_set(AP_EDENIED,
				    "GitHub refused to say whether the user belongs to %s (%s): "
				    "give the App the organization permission Members (read) and "
				    "have the organization accept it",
				    org, why);
	}
	if (!rc) {
		const char *state =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "state"));

		*yes = state && strcmp(state, "active") == 0;
	}
	cJSON_Delete(o);
	return rc;
}
