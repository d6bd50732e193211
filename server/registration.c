/* SPDX-License-Identifier: MIT */
/* server/registration.c - one-click GitHub App registration, the manifest flow
 * (registration.h). */
#include "server/registration.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/jsonnum.h"
#include "common/log.h"
#include "common/redact.h"
#include "server/assets.h"
#include "server/nonce.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reg {
	reg_config cfg;
	nonce_store *states;
};

int reg_new(reg **out, const reg_config *cfg)
{
	reg *r;
	int rc;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return ap_error_set(AP_ENOMEM, "out of memory");
	r->cfg = *cfg;
	if ((rc = nonce_store_new(&r->states, REG_STATES_MAX))) {
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void reg_free(reg *r)
{
	if (!r)
		return;
	nonce_store_free(r->states);
	free(r);
}

bool reg_org_ok(const char *org)
{
	size_t n = 0;

	for (; org && org[n]; n++)
		if (n >= 39 ||
		    !((org[n] >= 'a' && org[n] <= 'z') || (org[n] >= 'A' && org[n] <= 'Z') ||
		      (org[n] >= '0' && org[n] <= '9') || org[n] == '-'))
			return false;
	return n > 0;
}

/* A cut URL would send GitHub (webhooks, the browser) elsewhere: too long is an error. */
static int set_url(cJSON *o, const char *key, const char *base, const char *path)
{
	char url[FLOW_URL_MAX];
	int rc;

	if ((rc = ap_fmt(url, sizeof(url), "%s%s", base, path)))
		return rc;
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	if (!cJSON_AddStringToObject(o, key, url))
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

/* deploy/app.yml with this server's URLs (malloc'd JSON text), or NULL. */
static char *manifest(const reg *r)
{
	cJSON *m = cJSON_Parse(asset_app), *hook, *cb;
	char url[FLOW_URL_MAX];
	char *text = NULL;

	if (!m) {
		ap_error_set(AP_EINVAL, "the compiled-in App manifest is not JSON");
		return NULL;
	}
	hook = cJSON_GetObjectItemCaseSensitive(m, "hook_attributes");
	cJSON_DeleteItemFromObjectCaseSensitive(m, "callback_urls");
	if (set_url(m, "url", r->cfg.public_url, "") ||
	    (cJSON_IsObject(hook) &&
	     set_url(hook, "url", r->cfg.public_url, r->cfg.webhook_path)) ||
	    set_url(m, "redirect_url", r->cfg.console_url, "/setup/callback") ||
	    set_url(m, "setup_url", r->cfg.console_url, "/") ||
	    ap_fmt(url, sizeof(url), "%s/login/callback", r->cfg.console_url))
		goto out;
	cb = cJSON_AddArrayToObject(m, "callback_urls");
	if (cb)
		cJSON_AddItemToArray(cb, cJSON_CreateString(url));
	text = cJSON_PrintUnformatted(m);
	if (!text)
		ap_error_set(AP_ENOMEM, "out of memory");
out:
	cJSON_Delete(m);
	return text;
}

/* The refusals before a registration starts; true when one was written to *a. */
static bool refused(const reg *r, const char *org, flow_answer *a)
{
	if (!r->cfg.offered) {
		flow_problem(
		    a, 403, "Registration is not offered here",
		    "This console is reachable beyond loopback, so it does not register Apps.",
		    "open /setup on a loopback or unix-socket admin listener (autopatch setup)");
		return true;
	}
	if (!r->cfg.public_url || !r->cfg.console_url) {
		flow_problem(
		    a, 409, "Set the public URL first",
		    !r->cfg.public_url
			? "AUTOPATCH_PUBLIC_URL is not set, so GitHub would not know where "
			  "to send webhooks."
			: "AUTOPATCH_CONSOLE_URL is not set and the admin listener is a unix "
			  "socket, so GitHub would not know where to send you back.",
		    !r->cfg.public_url
			? "set AUTOPATCH_PUBLIC_URL to the URL GitHub reaches this server at "
			  "(https://autopatch.example.org) and restart"
			: "set AUTOPATCH_CONSOLE_URL to the URL your browser reaches the "
			  "console at");
		return true;
	}
	if (org && *org && !reg_org_ok(org)) {
		flow_problem(a, 400, "Not an organization name",
			     "An organization's name has letters, digits and hyphens only.",
			     "go back and type the organization's login as GitHub shows it");
		return true;
	}
	return false;
}

int reg_begin(reg *r, const char *org, reg_form *f, flow_answer *a)
{
	char state[NONCE_HEX + 1];
	int rc;

	memset(f, 0, sizeof(*f));
	if (refused(r, org, a))
		return ap_error_set(AP_EINVAL, "%s", a->what);
	if ((rc = nonce_issue(r->states, "setup", REG_TTL_MS, ap_wall_ms(), state)) ||
	    (rc = ap_fmt(f->hook, sizeof(f->hook), "%s%s", r->cfg.public_url,
			 r->cfg.webhook_path)) ||
	    (rc = r->cfg.new_app_url(r->cfg.gh_ud, org, f->action, sizeof(f->action))) ||
	    (rc = ap_fmt(f->action + strlen(f->action), sizeof(f->action) - strlen(f->action),
			 "?state=%s", state)) ||
	    !(f->manifest = manifest(r))) {
		rc = rc ? rc : AP_EIO;
		flow_problem(a, 500, "Cannot start the registration", ap_error_last(),
			     "check the server's log and try again");
		return rc;
	}
	return 0;
}

/* KEY="value" with the escapes config.c's .env reader undoes. */
static void env_line(ap_buf *b, const char *key, const char *value)
{
	ap_buf_addf(b, "%s=\"", key);
	for (const char *s = value ? value : ""; *s; s++) {
		if (*s == '\n')
			ap_buf_adds(b, "\\n");
		else if (*s == '"' || *s == '\\')
			ap_buf_addf(b, "\\%c", *s);
		else if (*s != '\r')
			ap_buf_add(b, s, 1);
	}
	ap_buf_adds(b, "\"\n");
}

static int store_credentials(const reg *r, const cJSON *app, const char *id)
{
	ap_buf b = AP_BUF_INIT(256 * 1024);
	int rc;

	ap_buf_adds(&b, "# Written by autopatch's App registration (/setup). Keep it secret.\n");
	env_line(&b, "APP_ID", id);
	env_line(&b, "PRIVATE_KEY", ap_json_str(app, "pem"));
	env_line(&b, "WEBHOOK_SECRET", ap_json_str(app, "webhook_secret"));
	env_line(&b, "GITHUB_CLIENT_ID", ap_json_str(app, "client_id"));
	env_line(&b, "GITHUB_CLIENT_SECRET", ap_json_str(app, "client_secret"));
	rc = fs_write_atomic(r->cfg.credentials_file, ap_buf_str(&b), b.len, 0600);
	OPENSSL_cleanse(b.data, b.len);
	ap_buf_release(&b);
	return rc;
}

/* Redeem the state and check the code; true when a problem was written to *a. */
static bool bad_answer(reg *r, const char *code, const char *state, flow_answer *a)
{
	int rc = nonce_redeem(r->states, "setup", state, ap_wall_ms());

	if (rc == AP_ETIMEOUT) {
		flow_problem(a, 400, "The registration expired",
			     "More than an hour passed since the registration page was opened.",
			     "start again at /setup");
		return true;
	}
	if (rc) {
		flow_problem(a, 400, "Unknown registration",
			     "This answer does not carry a state that this server issued (or it "
			     "was already used), so it is refused.",
			     "start again at /setup on this server");
		return true;
	}
	if (!code || !*code) {
		flow_problem(a, 400, "No code from GitHub", "GitHub sent you back without a code.",
			     "start again at /setup");
		return true;
	}
	return false;
}

/* Store the App GitHub handed over and put it in use; a 303 to its installation page. */
static void keep_app(reg *r, const cJSON *app, flow_answer *a)
{
	char where[FLOW_URL_MAX], id[32];

	if (ap_fmt(id, sizeof(id), "%.0f", ap_json_num(app, "id"))) {
		flow_problem(a, 502, "GitHub did not hand over the App", ap_error_last(),
			     "register again at /setup");
		return;
	}
	redact_add_secret(ap_json_str(app, "pem"));
	redact_add_secret(ap_json_str(app, "webhook_secret"));
	redact_add_secret(ap_json_str(app, "client_secret"));
	if (store_credentials(r, app, id)) {
		flow_problem(a, 500, "Cannot store the App's credentials", ap_error_last(),
			     "make AUTOPATCH_CREDENTIALS_FILE a writable path, then register again "
			     "at /setup (delete the App GitHub just made in its settings)");
		return;
	}
	{
		reg_app got = {id, ap_json_str(app, "pem"), ap_json_str(app, "webhook_secret"),
			       ap_json_str(app, "client_id"), ap_json_str(app, "client_secret")};

		r->cfg.registered(r->cfg.ud, &got);
	}
	ap_info("registration: App %s (id %s) stored in %s and in use", ap_json_str(app, "slug"),
		id, r->cfg.credentials_file);
	/* The installation page on the configured host (never a URL from the answer); without
	 * a usable slug, the list of Apps there. */
	if (r->cfg.install_url(r->cfg.gh_ud, ap_json_str(app, "slug"), where, sizeof(where)) &&
	    ap_fmt(where, sizeof(where), "%s/settings/apps", r->cfg.web_url))
		snprintf(where, sizeof(where), "/"); /* the console itself */
	ap_error_clear();
	flow_redirect(a, where);
}

void reg_finish(reg *r, const char *code, const char *state, flow_answer *a)
{
	cJSON *app = NULL, *pem;
	int rc;

	if (!r->cfg.offered) {
		refused(r, NULL, a);
		return;
	}
	if (bad_answer(r, code, state, a))
		return;
	rc = r->cfg.convert(r->cfg.gh_ud, code, &app);
	if (rc) {
		ap_warn("registration: the code exchange failed: %s", ap_error_last());
		flow_problem(
		    a, 502, "GitHub did not hand over the App", ap_error_last(),
		    rc == AP_ENOTFOUND
			? "the code expired (it works once, within an hour): register again "
			  "at /setup; delete the half-made App in GitHub's settings if it "
			  "exists"
			: "try again at /setup; if it keeps failing, check GITHUB_API_URL");
		return;
	}
	keep_app(r, app, a);
	pem = cJSON_GetObjectItem(app, "pem");
	if (cJSON_IsString(pem))
		OPENSSL_cleanse(pem->valuestring, strlen(pem->valuestring));
	cJSON_Delete(app);
}
