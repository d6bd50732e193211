/* SPDX-License-Identifier: MIT */
/* server/console.h - the job console on the admin listener, with the App registration
 * (server/registration.h) and the sign-in (server/signin.h) it offers.
 *
 * Pages (HTML that works without JavaScript; /assets/console-live.js only adds live
 * updates):
 *   GET  /                       jobs, newest first, 100 a page; ?state=S&repo=OWNER/NAME
 *                                filter them, ?before=ID pages back
 *   GET  /events                 Server-Sent Events: the list's changed rows and counts
 *   GET  /jobs/N                 one job: the issue and the outcome first, then the timeline,
 *                                the evidence, the diff, and the details folded
 *   GET  /jobs/N/events          Server-Sent Events: the job's new events (each once, after
 *                                ?after or Last-Event-ID), its changed fields, its end
 *   GET  /jobs/N/output          ?line=L&field=F: one output of the trajectory in full
 *   GET  /jobs/N/trajectory      the job's trajectory (JSONL) as a download
 *   POST /jobs/N/cancel, /retry  buttons; need the session's CSRF token (form field csrf)
 *   GET  /setup                  one-click App registration (the manifest flow)
 *   GET  /setup/callback         GitHub's redirect with ?code&state
 *   GET  /login, /login/callback "Sign in with GitHub" (the App's OAuth credentials)
 *   POST /logout
 *   GET  /assets/...             the stylesheet and script, compiled in (server/assets.h)
 *
 * Who sees what. When sign-in is not required (the admin listener is loopback TCP or a unix
 * socket and AUTOPATCH_CONSOLE_SIGN_IN is auto), the visitor is the operator: every job, and
 * a session is created on the first visit only to bind the CSRF token of the buttons. When it
 * is required, every page but /login, /login/callback and /assets answers 401 without a
 * session; a signed-in user sees the jobs of repositories they can push to (asked of GitHub
 * with their token, cached five minutes), or every job (and /metrics) when AUTOPATCH_CONSOLE_USERS
 * lists their login or, as org:NAME, an organization they are an active member of (asked of
 * GitHub with their token once, at sign-in); other jobs answer 403 (list, page, live
 * stream, trajectory and buttons alike), and /setup is refused (register from a loopback
 * console). The decision rests on the listener's configured address only, never on the
 * client's address or forwarded headers.
 *
 * Sessions live in this process's memory only: a restart signs everyone out (and forgets
 * registrations begun but not finished); the browser's cookie then names no session and the
 * visitor signs in again.
 *
 * GitHub is reached through console_github (filled by cli/serve.c with github/oauth.h), so
 * server/ stays free of GitHub's REST details.
 */
#ifndef AP_CONSOLE_H
#define AP_CONSOLE_H

#include "server/queue.h"
#include "server/registration.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct console console;

/* GitHub calls the console makes; each returns 0 or a negative AP_E* with a sentence. */
typedef struct console_github {
	void *ud;
	/* POST /app-manifests/{code}/conversions: *out is GitHub's answer (id, slug, html_url,
	 * pem, webhook_secret, client_id, client_secret), freed by the caller. */
	int (*manifest_convert)(void *ud, const char *code, cJSON **out);
	/* The OAuth code exchange: *token is malloc'd (caller wipes and frees). */
	int (*oauth_exchange)(void *ud, const char *client_id, const char *client_secret,
			      const char *code, const char *redirect_uri, char **token);
	/* GET /user: *login is malloc'd. */
	int (*user_login)(void *ud, const char *token, char **login);
	/* Whether the token's user can push to repo. */
	int (*can_push)(void *ud, const char *token, const char *repo, bool *yes);
	/* Whether the token's user is an active member of the organization org. */
	int (*in_org)(void *ud, const char *token, const char *org, bool *yes);
	/* GitHub's new-App and installation pages (reg_config, server/registration.h). */
	int (*new_app_url)(void *ud, const char *org, char *buf, size_t n);
	int (*install_url)(void *ud, const char *slug, char *buf, size_t n);
} console_github;

/* What a registration handed over (server/registration.h). */
typedef reg_app console_app;

typedef struct console_config {
	const char *public_url;	      /* AUTOPATCH_PUBLIC_URL, or NULL (registration says so) */
	const char *console_url;      /* the admin listener as the browser reaches it, or NULL */
	const char *web_url;	      /* GITHUB_URL */
	const char *webhook_path;     /* WEBHOOK_PATH */
	const char *credentials_file; /* AUTOPATCH_CREDENTIALS_FILE */
	const char *client_id;	      /* GITHUB_CLIENT_ID, or NULL */
	const char *client_secret;    /* GITHUB_CLIENT_SECRET, or NULL */
	const char *operators;	      /* AUTOPATCH_CONSOLE_USERS (logins, org:NAME), or NULL */
	bool sign_in;		      /* sign-in required (see above) */
	int64_t session_ms;	      /* a session's life */
	console_github gh;
	/* After a registration stored the new App: the webhook verifier takes its secret from
	 * now on and the workers its id and key. Called on the admin listener's thread; app is
	 * borrowed for the call. */
	void (*registered)(void *ud, const console_app *app);
	/* A job was put back in the queue (retry): wake a worker. May be NULL. */
	void (*queued)(void *ud);
	void *ud;
} console_config;

/* Strings of cfg are copied. Starts the thread that wakes live-update streams. */
int console_new(console **out, const console_config *cfg);

/* Answer one request on the admin listener (paths other than /healthz and /metrics). body
 * is the request body of a POST (at most CONSOLE_BODY_MAX bytes; the caller answers 413
 * beyond). q is the listener's database connection (its thread only). */
#define CONSOLE_BODY_MAX 16384
enum MHD_Result console_handle(console *c, struct MHD_Connection *conn, queue *q, const char *url,
			       const char *method, const char *body, size_t len);

/* Whether the request may read /metrics: always when sign-in is not required, else only with
 * the session of a login listed in AUTOPATCH_CONSOLE_USERS. */
bool console_may_read_metrics(console *c, struct MHD_Connection *conn);

/* End every live-update stream (they finish at their next wake-up) and wait up to wait_ms
 * until none is suspended, so the listener's daemon can be stopped. */
void console_stop_streams(console *c, int64_t wait_ms);

/* Accepts NULL. Call after the admin listener's daemon has stopped. */
void console_free(console *c);

#endif
