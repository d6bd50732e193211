/* SPDX-License-Identifier: MIT */
/* server/registration.h - one-click GitHub App registration (GitHub's manifest flow).
 *
 *   GET /setup           reg_begin: the form that posts deploy/app.yml, with this server's
 *                        URLs, to GitHub (for the user's account or an organization)
 *   GET /setup/callback  reg_finish: GitHub's redirect with ?code&state; the code is
 *                        converted into the App's credentials, which are written to
 *                        AUTOPATCH_CREDENTIALS_FILE (0600) and put in use at once
 *
 * The `state` of a registration is a one-time server-side nonce valid for an hour
 * (server/nonce.h). Registration is offered only on a console that needs no sign-in (a
 * loopback or unix-socket admin listener), so only the operator can fill the store; it holds
 * at most REG_STATES_MAX pending registrations. The console (console.c) draws the pages;
 * GitHub is reached through the convert callback, so server/ stays free of GitHub's REST.
 */
#ifndef AP_REGISTRATION_H
#define AP_REGISTRATION_H

#include "server/flow.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

#define REG_STATES_MAX 256
#define REG_TTL_MS     (60 * 60 * 1000)

typedef struct reg reg;

/* What a registration handed over (GitHub's answer to the manifest conversion). */
typedef struct reg_app {
	const char *app_id;	    /* the App ID (digits) */
	const char *pem;	    /* its private key (PEM text) */
	const char *webhook_secret; /* never empty */
	const char *client_id;	    /* the OAuth client ID, or "" */
	const char *client_secret;  /* or "" */
} reg_app;

typedef struct reg_config {
	bool offered;		      /* false: every request is refused (sign-in is required) */
	const char *public_url;	      /* AUTOPATCH_PUBLIC_URL, or NULL (the page says so) */
	const char *console_url;      /* the console as the browser reaches it, or NULL */
	const char *web_url;	      /* GITHUB_URL */
	const char *webhook_path;     /* WEBHOOK_PATH */
	const char *credentials_file; /* AUTOPATCH_CREDENTIALS_FILE */
	/* POST /app-manifests/{code}/conversions: *out is GitHub's answer (id, slug, html_url,
	 * pem, webhook_secret, client_id, client_secret), freed by the caller. 0 or AP_E*. */
	int (*convert)(void *ud, const char *code, cJSON **out);
	/* GitHub's pages, built by github/urls.h (gh_urls_new_app, gh_urls_install), which this
	 * layer does not include: the page that registers an App from a manifest (for org when
	 * not NULL or empty) and an App's installation page. 0, or AP_EINVAL / AP_ETOOBIG. */
	int (*new_app_url)(void *ud, const char *org, char *buf, size_t n);
	int (*install_url)(void *ud, const char *slug, char *buf, size_t n);
	void *gh_ud; /* the ud of convert, new_app_url and install_url */
	/* The new App is stored: put it in use. app is borrowed for the call. */
	void (*registered)(void *ud, const reg_app *app);
	void *ud;
} reg_config;

/* What the registration page shows: the form's target on GitHub and the manifest it posts. */
typedef struct reg_form {
	char action[FLOW_URL_MAX]; /* GitHub's "new App" URL with the state */
	char hook[FLOW_URL_MAX];   /* where webhooks will go */
	char *manifest;		   /* JSON text, malloc'd: free it */
} reg_form;

/* Strings of cfg are borrowed and must outlive r (the console keeps copies). */
int reg_new(reg **out, const reg_config *cfg);
/* Accepts NULL. */
void reg_free(reg *r);

/* Start a registration for org (NULL or "" for the user's own account): 0 with *f filled,
 * or a negative AP_E* with a problem in *a (refused here, URLs not set, a bad organization
 * name, no randomness). */
int reg_begin(reg *r, const char *org, reg_form *f, flow_answer *a);

/* GitHub's redirect: redeem state, convert code, store and use the App. *a is always filled:
 * a 303 to the App's installation page, or a problem saying what to do. */
void reg_finish(reg *r, const char *code, const char *state, flow_answer *a);

/* Whether org looks like an organization's login (letters, digits, hyphens; 1-39). */
bool reg_org_ok(const char *org);

#endif
