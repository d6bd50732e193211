/* SPDX-License-Identifier: MIT */
/* github/urls.c - GITHUB_URL and GITHUB_API_URL, derived from each other (see urls.h). */
#include "github/urls.h"

#include "common/buf.h"
#include "common/err.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define DOTCOM_WEB "https://github.com"
#define DOTCOM_API "https://api.github.com"
#define GHES_API   "/api/v3"
#define URL_LIMIT  400

/* Copy a setting's URL into dst without trailing slashes, after checking it. */
static int take(const char *name, const char *v, char dst[GH_URL_MAX])
{
	const char *host;
	size_t n = strlen(v);

	while (n > 0 && v[n - 1] == '/')
		n--;
	if (strncmp(v, "https://", 8) == 0)
		host = v + 8;
	else if (strncmp(v, "http://", 7) == 0)
		host = v + 7;
	else
		return ap_error_set(AP_EINVAL,
				    "%s must be an http(s) URL such as https://github.example.com "
				    "(GitHub Enterprise Server), not \"%.80s\"",
				    name, v);
	if (n > URL_LIMIT)
		return ap_error_set(AP_EINVAL, "%s is longer than %d bytes", name, URL_LIMIT);
	if ((size_t)(host - v) >= n || memchr(v, '@', n) || memchr(v, '?', n) || memchr(v, '#', n))
		return ap_error_set(AP_EINVAL,
				    "%s must be a plain URL without credentials, query or "
				    "fragment",
				    name);
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)v[i]) || (unsigned char)v[i] < 0x20)
			return ap_error_set(AP_EINVAL, "%s contains white space", name);
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

int gh_urls_get(const ap_config *cfg, gh_urls *out)
{
	bool web_set = cfg_is_set(cfg, "GITHUB_URL"), api_set = cfg_is_set(cfg, "GITHUB_API_URL");
	size_t n;
	int rc;

	/* Every copy below fits: take() keeps at most URL_LIMIT (400) bytes of GH_URL_MAX. */
	memset(out, 0, sizeof(*out));
	if (web_set && (rc = take("GITHUB_URL", cfg_str(cfg, "GITHUB_URL"), out->web)))
		return rc;
	if (api_set && (rc = take("GITHUB_API_URL", cfg_str(cfg, "GITHUB_API_URL"), out->api)))
		return rc;
	if (!web_set && !api_set) {
		snprintf(out->web, sizeof(out->web), "%s", DOTCOM_WEB);
		snprintf(out->api, sizeof(out->api), "%s", DOTCOM_API);
	} else if (!api_set) {
		if (strcmp(out->web, DOTCOM_WEB) == 0)
			snprintf(out->api, sizeof(out->api), "%s", DOTCOM_API);
		else
			snprintf(out->api, sizeof(out->api), "%.400s" GHES_API, out->web);
	} else if (!web_set) {
		n = strlen(out->api);
		if (strcmp(out->api, DOTCOM_API) == 0)
			snprintf(out->web, sizeof(out->web), "%s", DOTCOM_WEB);
		else if (n > strlen(GHES_API) &&
			 strcmp(out->api + n - strlen(GHES_API), GHES_API) == 0)
			snprintf(out->web, sizeof(out->web), "%.*s", (int)(n - strlen(GHES_API)),
				 out->api);
		else
			snprintf(out->web, sizeof(out->web), "%.400s", out->api);
	}
	return 0;
}

static bool safe_name(const char *s, size_t n)
{
	if (n == 0 || n > 100 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

int gh_urls_git(const gh_urls *u, const char *full_name, char *buf, size_t n)
{
	const char *slash = full_name ? strchr(full_name, '/') : NULL;

	if (n)
		buf[0] = '\0';
	if (!slash || !safe_name(full_name, (size_t)(slash - full_name)) ||
	    !safe_name(slash + 1, strlen(slash + 1)))
		return ap_error_set(AP_EINVAL, "\"%.200s\" is not a repository name (owner/name)",
				    full_name ? full_name : "");
	return ap_fmt(buf, n, "%s/%s.git", u->web, full_name);
}

int gh_urls_new_app(const gh_urls *u, const char *org, char *buf, size_t n)
{
	if (org && *org) {
		if (!safe_name(org, strlen(org)))
			return ap_error_set(AP_EINVAL, "\"%.100s\" is not an organization name",
					    org);
		return ap_fmt(buf, n, "%s/organizations/%s/settings/apps/new", u->web, org);
	}
	return ap_fmt(buf, n, "%s/settings/apps/new", u->web);
}

int gh_urls_install(const gh_urls *u, const char *slug, char *buf, size_t n)
{
	if (!slug || !safe_name(slug, strlen(slug)))
		return ap_error_set(AP_EINVAL, "\"%.100s\" is not an App slug", slug ? slug : "");
	return ap_fmt(buf, n, "%s/apps/%s/installations/new", u->web, slug);
}
