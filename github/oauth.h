/* SPDX-License-Identifier: MIT */
/* github/oauth.h - the App's browser flows as GitHub calls: turning a manifest code into the
 * App's credentials, and signing a user in through the App's OAuth credentials.
 *
 * All functions are thread-safe (each call uses its own client), return 0 or a negative AP_E*
 * code with a sentence (GitHub's message included, redacted), and never keep what they are
 * given. Web URLs come from GITHUB_URL, API calls go to GITHUB_API_URL.
 */
#ifndef AP_GH_OAUTH_H
#define AP_GH_OAUTH_H

#include "common/config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* Exchange the temporary code GitHub handed the registration's redirect (valid for one hour)
 * for the new App's credentials: *out is GitHub's answer (id, slug, html_url, pem,
 * webhook_secret, client_id, client_secret; caller cJSON_Delete()s, after wiping what it
 * copied), checked to hold a positive id, a pem and a non-empty webhook_secret. The call
 * carries no Authorization: the code is the proof. AP_EINVAL for a code that is not
 * [A-Za-z0-9_-]{1,100}; AP_ENOTFOUND when GitHub does not know it (expired or used: register
 * again); AP_EHTTP otherwise. */
int gh_manifest_convert(const ap_config *cfg, const char *code, cJSON **out);

/* POST {GITHUB_URL}/login/oauth/access_token with the App's client id and secret and the
 * code of the sign-in redirect; *token (malloc'd, caller wipes and frees) is the user's
 * access token. AP_EDENIED when GitHub refuses the code (its error_description in the
 * message). */
int gh_oauth_exchange(const ap_config *cfg, const char *client_id, const char *client_secret,
		      const char *code, const char *redirect_uri, char **token);

/* GET /user with the user's token: *login (malloc'd) is the user's login. */
int gh_user_login(const ap_config *cfg, const char *token, char **login);

/* Whether the token's user may push to repo ("owner/name"): GET /repos/{repo} with the
 * user's token and its permissions.push. A repository the user cannot see (404) is false,
 * not an error. */
int gh_user_can_push(const ap_config *cfg, const char *token, const char *repo, bool *yes);

/* Whether the token's user is an active member of the organization org: GET
 * /user/memberships/orgs/{org} with the user's token and its state ("pending", an invitation
 * not yet accepted, is false). An organization the user does not belong to (404) is false, not
 * an error. GitHub answers 403 when the App lacks the organization permission "Members"
 * (read) or the organization blocks it: AP_EDENIED with a sentence naming that permission.
 * AP_EINVAL for a name that is not an organization login. */
int gh_user_in_org(const ap_config *cfg, const char *token, const char *org, bool *yes);

#endif
