/* SPDX-License-Identifier: MIT */
/* cli/serve.c - `autopatch serve`: read the settings, open the queue, start the writer,
 * the workers and the HTTP front end, then wait for SIGTERM/SIGINT and shut down in order
 * (stop accepting, commit what was accepted, let running jobs stop or re-queue them). */
#include "job/pipeline.h"
#include "common/err.h"
#include "common/log.h"
#include "cli/commands.h"
#include "server/http.h"
#include "server/ingest.h"
#include "server/queue.h"
#include "server/workers.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Settings of `serve`, validated before anything starts. */
struct serve_opts {
	const char *secret, *secret_prev, *label, *path, *db, *bind;
	bool status_public;
	int64_t port, workers, lease_s, max_attempts, retry_s, grace_s;
};

static int usage_error(const char *msg)
{
	fprintf(stderr, "autopatch: %s\n", msg);
	return 2;
}

static int read_opts(const ap_config *cfg, struct serve_opts *o)
{
	int rc;

	o->secret = cfg_str(cfg, "WEBHOOK_SECRET");
	if (!o->secret)
		return ap_error_set(AP_EINVAL, "WEBHOOK_SECRET is not set: set it to your GitHub "
					       "App's webhook secret (in .env or the environment)");
	o->secret_prev = cfg_str(cfg, "WEBHOOK_SECRET_PREVIOUS");
	o->label = cfg_str(cfg, "AUTOPATCH_LABEL");
	o->path = cfg_str(cfg, "WEBHOOK_PATH");
	if (o->path[0] != '/' || strlen(o->path) > 200 || strpbrk(o->path, " ?#"))
		return ap_error_set(AP_EINVAL,
				    "WEBHOOK_PATH=\"%.60s\" is not a URL path: use one "
				    "that starts with / such as /api/github/webhooks",
				    o->path);
	o->db = cfg_str(cfg, "AUTOPATCH_DB");
	/* 0.0.0.0 by default: GitHub (or the reverse proxy) must reach the server. Set
	 * AUTOPATCH_BIND=127.0.0.1 behind a local proxy or in tests. */
	o->bind = cfg_str(cfg, "AUTOPATCH_BIND");
	if ((rc = cfg_int(cfg, "PORT", 1, 65535, &o->port)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_WORKERS", 0, 64, &o->workers)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_LEASE_SECONDS", 1, 86400, &o->lease_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_MAX_ATTEMPTS", 1, 100, &o->max_attempts)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_RETRY_SECONDS", 0, 86400, &o->retry_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_SHUTDOWN_GRACE_SECONDS", 0, 3600, &o->grace_s)) ||
	    (rc = cfg_bool(cfg, "AUTOPATCH_STATUS_PUBLIC", &o->status_public)))
		return rc;
	return 0;
}

struct serve_ctx {
	wk_pool *pool;
};

static void on_queued(void *ud)
{
	struct serve_ctx *ctx = ud;

	wk_notify(ctx->pool);
}

int serve_main(int argc, char **argv, ap_config *cfg)
{
	struct serve_opts o;
	struct serve_ctx ctx = {NULL};
	http_config hc;
	http_server *http = NULL;
	pipeline *pipe = NULL;
	ingest *ing = NULL;
	queue *q = NULL;
	sigset_t sigs;
	char instance[128], host[64] = "host";
	int sig = 0, ret = 2;

	if (argc > 1)
		return usage_error("serve takes no arguments; it is configured by .env and the "
				   "environment");
	(void)argv;
	if (read_opts(cfg, &o))
		return usage_error(ap_error_last());

	/* Signals are taken by sigwait below; block them before any thread starts. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (q_open(&q, o.db, Q_OPEN_CREATE)) {
		fprintf(stderr, "autopatch: %s: set AUTOPATCH_DB to a writable file path\n",
			ap_error_last());
		return 2;
	}
	if (o.workers > 0 && pipeline_new(&pipe, cfg)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		goto out;
	}
	if (ing_new(&ing, o.db, on_queued, &ctx)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		goto out;
	}
	gethostname(host, sizeof(host) - 1);
	snprintf(instance, sizeof(instance), "%.60s:%d:%lld", host, (int)getpid(),
		 (long long)q_now_ms());
	if (o.workers > 0) {
		wk_config wc = {
		    .db_path = o.db,
		    .workers = (int)o.workers,
		    .lease_ms = o.lease_s * 1000,
		    .max_attempts = (int)o.max_attempts,
		    .retry_base_ms = o.retry_s * 1000,
		    .instance = instance,
		    .run = pipeline_run,
		    .ud = pipe,
		};

		if (wk_start(&ctx.pool, &wc)) {
			fprintf(stderr, "autopatch: %s\n", ap_error_last());
			goto out;
		}
	}
	hc = (http_config){
	    .bind = o.bind,
	    .port = (int)o.port,
	    .path = o.path,
	    .wh = {{o.secret, o.secret_prev}, o.label},
	    .db_path = o.db,
	    .ing = ing,
	    .pool = ctx.pool,
	    .workers = (int)o.workers,
	    .status_public = o.status_public,
	};
	if (http_start(&http, &hc)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		goto out;
	}
	ap_info("listening on %s port %lld, webhook path %s, %lld worker(s), database %s", o.bind,
		(long long)o.port, o.path, (long long)o.workers, o.db);

	while (sigwait(&sigs, &sig) != 0)
		;
	ap_info("signal %d: shutting down", sig);
	ret = 0;
out:
	/* Order matters: stop taking requests, commit what was accepted, then stop the jobs. */
	http_stop(http, 3000);
	ing_free(ing);
	wk_stop(ctx.pool, o.grace_s * 1000);
	pipeline_free(pipe);
	q_close(q);
	if (ret == 0)
		ap_info("stopped");
	return ret;
}
