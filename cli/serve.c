/* SPDX-License-Identifier: MIT */
/* cli/serve.c - `autopatch serve`: read the settings, open the queue, start the writer,
 * the workers and the HTTP front end (public and admin listeners), then wait for SIGTERM or
 * SIGINT and shut down in order (stop accepting, commit what was accepted, let running jobs
 * stop or re-queue them). */
#include "cli/commands.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "github/oauth.h"
#include "github/rest.h"
#include "github/urls.h"
#include "job/pipeline.h"
#include "server/http.h"
#include "server/ingest.h"
#include "server/queue.h"
#include "server/workers.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* File descriptors beyond the connections: database, Docker, git, logs, pipes. */
#define SPARE_FDS 256

/* Free memory an arena keeps before giving it back. glibc's default (128 KiB) is less than
 * what the HTTP threads hold for the deliveries waiting for a COMMIT: under load each thread's
 * arena was trimmed (madvise) and faulted back in, ~5 page faults per delivery and ~7% of the
 * server's CPU. 1 MiB per arena removes them (`perf stat -e page-faults`: 5 -> 0 per delivery
 * at 200 connections). */
#define SERVE_TRIM_THRESHOLD (1 << 20)

/* Settings of `serve`, validated before anything starts. */
struct serve_opts {
	const char *secret, *secret_prev, *label, *path, *db, *bind;
	const char *sign_in;
	char console_url[256];
	int64_t session_h;
	listen_spec public_at, admin_at;
	int64_t port, workers, lease_s, heartbeat_s, rescue_s, max_attempts, retry_s, grace_s;
	int64_t max_conn, per_ip, headers_s, body_s, http_threads;
};

static int usage_error(const char *msg)
{
	fprintf(stderr, "autopatch: %s\n", msg);
	return 2;
}

int serve_console_url(const ap_config *cfg, const listen_spec *admin, char *out, size_t cap)
{
	const char *set = cfg_str(cfg, "AUTOPATCH_CONSOLE_URL");
	size_t n;

	if (set) {
		if (strncmp(set, "http://", 7) != 0 && strncmp(set, "https://", 8) != 0)
			return ap_error_set(
			    AP_EINVAL,
			    "AUTOPATCH_CONSOLE_URL=\"%.80s\" is not an http(s) URL: "
			    "set it to the URL your browser opens the console at",
			    set);
		/* A cut URL would send the browser elsewhere. */
		if (ap_fmt(out, cap, "%s", set))
			return ap_error_set(AP_ETOOBIG,
					    "AUTOPATCH_CONSOLE_URL is too long (%zu bytes; at most "
					    "%zu): set a shorter URL",
					    strlen(set), cap - 1);
	} else if (admin->kind == LISTEN_TCP) {
		if (ap_fmt(out, cap, "http://%s", admin->text))
			return ap_error_set(AP_ETOOBIG,
					    "the console's address %s is too long for "
					    "a URL: set AUTOPATCH_CONSOLE_URL",
					    admin->text);
	} else {
		out[0] = '\0';
		return 0;
	}
	n = strlen(out);
	while (n && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

/* The webhook's secret, label and path; a removed setting still set is an error. */
static int read_webhook_opts(const ap_config *cfg, struct serve_opts *o, bool registration)
{
	o->secret = cfg_str(cfg, "WEBHOOK_SECRET");
	if (!o->secret && !registration)
		return ap_error_set(AP_EINVAL, "WEBHOOK_SECRET is not set: set it to your GitHub "
					       "App's webhook secret (in .env or the environment), "
					       "or register a new App with `autopatch setup`");
	o->secret_prev = cfg_str(cfg, "WEBHOOK_SECRET_PREVIOUS");
	o->label = cfg_str(cfg, "AUTOPATCH_LABEL");
	o->path = cfg_str(cfg, "WEBHOOK_PATH");
	if (o->path[0] != '/' || strlen(o->path) > 200 || strpbrk(o->path, " ?#"))
		return ap_error_set(AP_EINVAL,
				    "WEBHOOK_PATH=\"%.60s\" is not a URL path: use one "
				    "that starts with / such as /api/github/webhooks",
				    o->path);
	/* Removed: still setting it is a mistake to point out, not to ignore. */
	if (cfg_is_set(cfg, "AUTOPATCH_STATUS_PUBLIC"))
		return ap_error_set(
		    AP_EINVAL, "AUTOPATCH_STATUS_PUBLIC is no longer supported: the status page "
			       "and /metrics are served only on the admin listener now "
			       "(AUTOPATCH_ADMIN_LISTEN, default 127.0.0.1:9464), never on the "
			       "public port; remove it");
	return 0;
}

/* The port, workers, queue timings and connection limits, checked against each other. */
static int read_limits(const ap_config *cfg, struct serve_opts *o)
{
	int rc;

	if ((rc = cfg_int(cfg, "PORT", 1, 65535, &o->port)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_WORKERS", 0, 64, &o->workers)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_LEASE_SECONDS", 1, 86400, &o->lease_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_HEARTBEAT_SECONDS", 0, 86400, &o->heartbeat_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_RESCUE_SECONDS", 0, 86400, &o->rescue_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_MAX_ATTEMPTS", 1, 100, &o->max_attempts)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_RETRY_SECONDS", 0, 86400, &o->retry_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_SHUTDOWN_GRACE_SECONDS", 0, 3600, &o->grace_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_MAX_CONNECTIONS", 2, 65536, &o->max_conn)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_MAX_CONNECTIONS_PER_IP", 0, 65536, &o->per_ip)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_HEADERS_DEADLINE_S", 1, 3600, &o->headers_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_BODY_DEADLINE_S", 1, 3600, &o->body_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_HTTP_THREADS", 0, 64, &o->http_threads)))
		return rc;
	if (o->http_threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o->http_threads = n < 1 ? 1 : n > 4 ? 4 : n;
	}
	if (o->heartbeat_s && o->heartbeat_s >= o->lease_s)
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_HEARTBEAT_SECONDS=%lld must be shorter than "
		    "AUTOPATCH_LEASE_SECONDS=%lld (a third of it is a good choice), "
		    "or the leases of live jobs run out",
		    (long long)o->heartbeat_s, (long long)o->lease_s);
	/* Headroom: one address may never hold more than half of the connections. */
	if (o->per_ip * 2 > o->max_conn)
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_MAX_CONNECTIONS_PER_IP=%lld leaves no headroom under "
		    "AUTOPATCH_MAX_CONNECTIONS=%lld: keep it at most half of that",
		    (long long)o->per_ip, (long long)o->max_conn);
	return 0;
}

/* The public and admin listeners, and the console's sign-in settings and URL. */
static int read_listeners(const ap_config *cfg, struct serve_opts *o, bool registration)
{
	int rc;

	if ((rc = listen_tcp(&o->public_at, "AUTOPATCH_BIND", o->bind, (int)o->port)) ||
	    (rc = listen_parse(&o->admin_at, "AUTOPATCH_ADMIN_LISTEN",
			       cfg_str(cfg, "AUTOPATCH_ADMIN_LISTEN"))))
		return rc;
	if (o->admin_at.kind == LISTEN_UNIX &&
	    (rc = listen_parse_mode(&o->admin_at.mode, "AUTOPATCH_ADMIN_SOCKET_MODE",
				    cfg_str(cfg, "AUTOPATCH_ADMIN_SOCKET_MODE"))))
		return rc;
	if (registration && o->admin_at.kind == LISTEN_OFF)
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_ADMIN_LISTEN=off: the registration page "
				    "is on the admin listener; set it to 127.0.0.1:9464");
	o->sign_in = cfg_str(cfg, "AUTOPATCH_CONSOLE_SIGN_IN");
	if (strcmp(o->sign_in, "auto") != 0 && strcmp(o->sign_in, "always") != 0)
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_CONSOLE_SIGN_IN=\"%.40s\" is neither auto nor always: "
		    "use auto (sign-in unless the admin listener is loopback or a "
		    "unix socket) or always",
		    o->sign_in);
	if ((rc = cfg_int(cfg, "AUTOPATCH_SESSION_HOURS", 1, 24 * 30, &o->session_h)) ||
	    (rc = serve_console_url(cfg, &o->admin_at, o->console_url, sizeof(o->console_url))))
		return rc;
	return 0;
}

static int read_opts(const ap_config *cfg, struct serve_opts *o, bool registration)
{
	int rc;

	if ((rc = read_webhook_opts(cfg, o, registration)))
		return rc;
	o->db = cfg_str(cfg, "AUTOPATCH_DB");
	/* 0.0.0.0 by default: GitHub (or the reverse proxy) must reach the server. Set
	 * AUTOPATCH_BIND=127.0.0.1 behind a local proxy or in tests. */
	o->bind = cfg_str(cfg, "AUTOPATCH_BIND");
	if ((rc = read_limits(cfg, o)))
		return rc;
	return read_listeners(cfg, o, registration);
}

/* The console's GitHub calls (github/oauth.h); ud is the config. */
static int gh_convert(void *ud, const char *code, cJSON **out)
{
	return gh_manifest_convert(ud, code, out);
}

static int gh_exchange(void *ud, const char *id, const char *secret, const char *code,
		       const char *redirect_uri, char **token)
{
	return gh_oauth_exchange(ud, id, secret, code, redirect_uri, token);
}

static int gh_login(void *ud, const char *token, char **login)
{
	return gh_user_login(ud, token, login);
}

static int gh_push(void *ud, const char *token, const char *repo, bool *yes)
{
	return gh_user_can_push(ud, token, repo, yes);
}

static int gh_member(void *ud, const char *token, const char *org, bool *yes)
{
	return gh_user_in_org(ud, token, org, yes);
}

static int gh_new_app_url(void *ud, const char *org, char *buf, size_t n)
{
	gh_urls u;
	int rc = gh_urls_get(ud, &u);

	return rc ? rc : gh_urls_new_app(&u, org, buf, n);
}

static int gh_install_url(void *ud, const char *slug, char *buf, size_t n)
{
	gh_urls u;
	int rc = gh_urls_get(ud, &u);

	return rc ? rc : gh_urls_install(&u, slug, buf, n);
}

/* Every connection is a descriptor: raise the soft limit as far as the connection caps need,
 * or say which limit to change. */
static int ensure_fds(const struct serve_opts *o)
{
	rlim_t need = (rlim_t)o->max_conn + HTTP_ADMIN_CONNECTIONS + SPARE_FDS;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_MAX_CONNECTIONS=%lld needs %llu open files but the "
				    "limit is %llu: raise it (ulimit -n, LimitNOFILE=) or lower "
				    "AUTOPATCH_MAX_CONNECTIONS",
				    (long long)o->max_conn, (unsigned long long)need,
				    (unsigned long long)rl.rlim_max);
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return ap_error_set(AP_EINVAL,
				    "cannot raise the open-file limit to %llu for "
				    "AUTOPATCH_MAX_CONNECTIONS=%lld: raise it (ulimit -n) or lower "
				    "the setting",
				    (unsigned long long)need, (long long)o->max_conn);
	return 0;
}

/* What the threads share: the ingest writer wakes the pool, a registration on the admin
 * listener may create the pipeline and the pool (lock), the main thread stops them after the
 * listeners stopped. */
struct serve_ctx {
	const ap_config *cfg;
	pthread_mutex_t lock;	 /* pipe, and starting the pool */
	pipeline *pipe;		 /* NULL until there is an App (and workers are wanted) */
	_Atomic(wk_pool *) pool; /* NULL until the workers run */
	wk_config wc;		 /* the pool's settings, .ud set when it starts */
	queue *pace_q;		 /* shared databases: GitHub write pacing across replicas */
};

static int reserve_write(void *ud, int64_t installation, int64_t spacing_ms, int64_t *wait_ms)
{
	struct serve_ctx *ctx = ud;

	return q_pace(ctx->pace_q, installation, spacing_ms, ap_wall_ms(), wait_ms);
}

static void on_queued(void *ud)
{
	struct serve_ctx *ctx = ud;

	wk_notify(atomic_load(&ctx->pool));
}

/* A registration on the console: the running workers switch to the new App; when none ran
 * (registration mode, no App yet), the pipeline and the workers start now. A failure is
 * logged; the workers then keep what they had (restart to retry). */
static void on_registered(void *ud, http_server *http, const char *app_id, const char *pem)
{
	struct serve_ctx *ctx = ud;
	pipeline *pipe = NULL;
	wk_pool *pool = NULL;

	pthread_mutex_lock(&ctx->lock);
	if (ctx->pipe) {
		if (pipeline_set_app(ctx->pipe, app_id, pem))
			ap_err("the workers still use the previous App (restart to use App %s): %s",
			       app_id, ap_error_last());
		else
			ap_info("the workers use App %s from now on", app_id);
	} else if (ctx->wc.workers > 0) {
		if (pipeline_new_as(&pipe, ctx->cfg, app_id, pem)) {
			ap_err("no workers for App %s (fix this and restart): %s", app_id,
			       ap_error_last());
		} else {
			ctx->wc.ud = pipe;
			if (wk_start(&pool, &ctx->wc)) {
				ap_err("no workers for App %s (restart to retry): %s", app_id,
				       ap_error_last());
				pipeline_free(pipe);
			} else {
				ctx->pipe = pipe;
				atomic_store(&ctx->pool, pool);
				http_set_pool(http, pool, ctx->wc.workers);
				wk_notify(pool);
				ap_info("%d worker(s) started for App %s", ctx->wc.workers, app_id);
			}
		}
	}
	pthread_mutex_unlock(&ctx->lock);
}

/* Signals are taken by sigwait in serve_run: block them before any thread starts. */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	mallopt(M_TRIM_THRESHOLD, SERVE_TRIM_THRESHOLD);
}

/* The queue, and on a shared database a second connection that paces GitHub's
 * per-installation writes across replicas. 0, or -1 (the message is printed). */
static int open_queue(struct serve_ctx *ctx, const struct serve_opts *o, queue **q,
		      gh_write_pacer *pacer)
{
	if (q_open(q, o->db, Q_OPEN_CREATE)) {
		fprintf(stderr,
			"autopatch: %s: set AUTOPATCH_DB to a writable file path or a reachable "
			"postgresql:// URI\n",
			ap_error_last());
		return -1;
	}
	if (q_shared(*q)) {
		if (q_open(&ctx->pace_q, o->db, Q_OPEN_CREATE)) {
			fprintf(stderr, "autopatch: %s\n", ap_error_last());
			return -1;
		}
		gh_rest_set_pacer(pacer);
	}
	return 0;
}

/* The pipeline and the worker pool (when there is an App and workers are wanted). */
static int start_workers(struct serve_ctx *ctx, ap_config *cfg, const struct serve_opts *o,
			 bool app_later, const char *instance)
{
	wk_pool *pool = NULL;
	int rc;

	if (o->workers > 0 && !app_later && (rc = pipeline_new(&ctx->pipe, cfg)))
		return rc;
	ctx->wc = (wk_config){
	    .db_path = o->db,
	    .workers = (int)o->workers,
	    .lease_ms = o->lease_s * 1000,
	    .heartbeat_ms = o->heartbeat_s * 1000,
	    .rescue_ms = o->rescue_s * 1000,
	    .max_attempts = (int)o->max_attempts,
	    .retry_base_ms = o->retry_s * 1000,
	    .instance = instance,
	    .run = pipeline_run,
	    .ud = ctx->pipe,
	};
	if (!ctx->pipe)
		return 0;
	if ((rc = wk_start(&pool, &ctx->wc)))
		return rc;
	atomic_store(&ctx->pool, pool);
	return 0;
}

/* The console asks for sign-in when told to, and always off loopback. */
static bool console_signs_in(const struct serve_opts *o)
{
	return strcmp(o->sign_in, "always") == 0 || !listen_is_local(&o->admin_at);
}

/* The public and admin listeners, with the console's settings. */
static int start_http(http_server **http, struct serve_ctx *ctx, ap_config *cfg,
		      const struct serve_opts *o, ingest *ing)
{
	gh_urls urls;
	http_config hc;

	if (gh_urls_get(cfg, &urls))
		return AP_EINVAL;
	hc = (http_config){
	    .public_at = o->public_at,
	    .admin_at = o->admin_at,
	    .path = o->path,
	    .wh = {{o->secret, o->secret_prev}, o->label},
	    .db_path = o->db,
	    .ing = ing,
	    .pool = atomic_load(&ctx->pool),
	    .workers = ctx->pipe ? (int)o->workers : 0,
	    .lim = {(int)o->max_conn, (int)o->per_ip, (int)o->headers_s, (int)o->body_s,
		    (int)o->http_threads},
	    .console =
		{
		    .public_url = cfg_str(cfg, "AUTOPATCH_PUBLIC_URL"),
		    .console_url = o->console_url[0] ? o->console_url : NULL,
		    .web_url = urls.web,
		    .webhook_path = o->path,
		    .credentials_file = cfg_str(cfg, "AUTOPATCH_CREDENTIALS_FILE"),
		    .client_id = cfg_str(cfg, "GITHUB_CLIENT_ID"),
		    .client_secret = cfg_str(cfg, "GITHUB_CLIENT_SECRET"),
		    .operators = cfg_str(cfg, "AUTOPATCH_CONSOLE_USERS"),
		    .sign_in = console_signs_in(o),
		    .session_ms = o->session_h * 3600 * 1000,
		    .gh = {cfg, gh_convert, gh_exchange, gh_login, gh_push, gh_member,
			   gh_new_app_url, gh_install_url},
		},
	    .registered = on_registered,
	    .ud = ctx,
	};
	return http_start(http, &hc);
}

/* What an operator needs to know once the server listens. */
static void log_listening(const struct serve_ctx *ctx, const ap_config *cfg,
			  const struct serve_opts *o, queue *q)
{
	ap_info("listening on %s port %lld (%lld HTTP thread(s)), webhook path %s, %lld worker(s), "
		"database %s (%s%s)",
		o->bind, (long long)o->port, (long long)o->http_threads, o->path,
		ctx->pipe ? (long long)o->workers : 0LL, o->db, q_backend(q),
		q_shared(q) ? ", shared with any other replica" : "");
	if (o->admin_at.kind == LISTEN_OFF)
		ap_info("admin listener off: no status page, no /metrics");
	else
		ap_info("admin listener (status page, /metrics) on %s", o->admin_at.text);
	if (!listen_is_local(&o->admin_at) && o->admin_at.kind != LISTEN_OFF)
		ap_info("the admin listener %s is not a loopback address: the console asks for "
			"sign-in with GitHub, and /metrics too",
			o->admin_at.text);
	if (console_signs_in(o) && !cfg_is_set(cfg, "AUTOPATCH_CONSOLE_URL"))
		ap_warn("the console asks for sign-in but AUTOPATCH_CONSOLE_URL is not set: GitHub "
			"sends users back to %s/login/callback; set it to the URL browsers open",
			o->console_url[0] ? o->console_url : "(nowhere)");
	if (!o->secret)
		ap_info("no webhook secret yet: every delivery is refused until the App is "
			"registered at %s/setup",
			o->console_url[0] ? o->console_url : "the admin listener's");
}

int serve_run(ap_config *cfg, bool registration)
{
	struct serve_opts o;
	struct serve_ctx ctx = {.cfg = cfg};
	gh_write_pacer pacer = {reserve_write, &ctx};
	http_server *http = NULL;
	ingest *ing = NULL;
	bool app_later = false;
	queue *q = NULL;
	sigset_t sigs;
	char instance[128], host[64] = "host";
	int sig = 0, ret = 2;

	if (read_opts(cfg, &o, registration) || ensure_fds(&o))
		return usage_error(ap_error_last());
	if (registration && !cfg_is_set(cfg, "APP_ID") && o.workers > 0) {
		ap_info("no App is registered yet: the workers start once it is");
		app_later = true;
	}
	pthread_mutex_init(&ctx.lock, NULL);
	block_signals(&sigs);
	if (open_queue(&ctx, &o, &q, &pacer))
		goto out;
	gethostname(host, sizeof(host) - 1);
	snprintf(instance, sizeof(instance), "%.60s:%d:%lld", host, (int)getpid(),
		 (long long)ap_wall_ms());
	if (start_workers(&ctx, cfg, &o, app_later, instance) ||
	    ing_new(&ing, o.db, on_queued, &ctx) || start_http(&http, &ctx, cfg, &o, ing)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		goto out;
	}
	log_listening(&ctx, cfg, &o, q);
	while (sigwait(&sigs, &sig) != 0)
		;
	ap_info("signal %d: shutting down", sig);
	ret = 0;
out:
	/* Order matters: stop taking requests, commit what was accepted, then stop the jobs. */
	http_stop(http, 3000); /* no registration starts workers after this */
	ing_free(ing);
	pthread_mutex_lock(&ctx.lock);
	wk_stop(atomic_load(&ctx.pool), o.grace_s * 1000);
	pipeline_free(ctx.pipe);
	pthread_mutex_unlock(&ctx.lock);
	pthread_mutex_destroy(&ctx.lock);
	gh_rest_set_pacer(NULL);
	q_close(ctx.pace_q);
	q_close(q);
	if (ret == 0)
		ap_info("stopped");
	return ret;
}

int serve_main(int argc, char **argv, ap_config *cfg)
{
	(void)argv;
	if (argc > 1)
		return usage_error("serve takes no arguments; it is configured by .env and the "
				   "environment");
	return serve_run(cfg, false);
}
