/* SPDX-License-Identifier: MIT */
/* github/urls.h - where GitHub is: the web host (GITHUB_URL) and the REST API
 * (GITHUB_API_URL), each derived from the other when only one is set, and every URL built from
 * them (git, the new-App page, an App's installation page).
 *
 * GitHub.com: https://github.com and https://api.github.com. GitHub Enterprise Server: set
 * GITHUB_URL=https://HOST (the API is then https://HOST/api/v3), or GITHUB_API_URL alone
 * (https://HOST/api/v3 gives the web https://HOST). A GITHUB_API_URL that is neither
 * api.github.com nor ends in /api/v3 (a stand-in serving the API at its root) is its own web
 * host. Git always goes to the web host: the clone and push URL of owner/name is
 * GITHUB_URL/owner/name.git, never a URL taken from an API answer, so the installation token
 * is only ever sent to the configured host.
 */
#ifndef AP_GH_URLS_H
#define AP_GH_URLS_H

#include "common/config.h"

#include <stddef.h>

#define GH_URL_MAX 512

typedef struct gh_urls {
	char web[GH_URL_MAX]; /* "https://github.com", no trailing slash */
	char api[GH_URL_MAX]; /* "https://api.github.com", no trailing slash */
} gh_urls;

/* Read and derive both. AP_EINVAL with a sentence naming the setting when one is not an
 * http(s) URL, has credentials, a query or a fragment, or is longer than 400 bytes. */
int gh_urls_get(const ap_config *cfg, gh_urls *out);

/* GITHUB_URL/owner/name.git for full_name "owner/name" (letters, digits, '.', '_', '-';
 * neither "." nor ".."). AP_EINVAL for another name, AP_ETOOBIG when buf (n bytes) is short. */
int gh_urls_git(const gh_urls *u, const char *full_name, char *buf, size_t n);

/* The page that registers a new App from a manifest: GITHUB_URL/settings/apps/new, or with
 * org (not NULL or empty) GITHUB_URL/organizations/ORG/settings/apps/new. */
int gh_urls_new_app(const gh_urls *u, const char *org, char *buf, size_t n);

/* An App's installation page: GITHUB_URL/apps/SLUG/installations/new. */
int gh_urls_install(const gh_urls *u, const char *slug, char *buf, size_t n);

#endif
