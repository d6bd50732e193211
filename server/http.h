/* SPDX-License-Identifier: MIT */
/* server/http.h - the HTTP front end on libmicrohttpd: two listeners.
 *
 * The public listener (AUTOPATCH_BIND and PORT: what GitHub or a reverse proxy reaches)
 * serves the webhook path (POST) and GET /healthz; every other path is a JSON 404 there. The
 * admin listener (AUTOPATCH_ADMIN_LISTEN: loopback by default, a unix socket, or off) serves
 * the console (console.h: job list, job pages, registration, sign-in), GET /metrics and GET
 * /healthz, never the webhook path. A registration replaces the webhook secrets in use
 * without a restart (readers hold a reference to the old ones until they finish) and hands
 * the new App to cfg.registered (the workers). No decision
 * depends on the client's address or on forwarded headers: what is private is simply not
 * served on the public listener.
 *
 * The admin listener has one polling thread (epoll), the public one lim.threads of them (a
 * libmicrohttpd thread pool: each accepted connection stays on one thread). A webhook request
 * is verified, routed and its body compressed on its thread (webhook.c, q_encode_body), then
 * its connection is suspended while the ingest writer commits it; the writer resumes it and
 * the answer goes out only after the COMMIT. Verifying, parsing and compressing cost more CPU
 * than the writer's statements, so at high rates one thread is the bottleneck.
 *
 * Flood limits: the public listener holds at most max_connections at once and at most
 * per_ip from one address (further connections are closed at once). On both listeners a
 * request must deliver its request line and headers within headers_s of the connection's
 * start (or of the previous request's end on a kept-alive connection) and its body within
 * body_s after the headers, or the connection is closed (deadline.h). libmicrohttpd's own
 * 30 s timeout is an idle timeout, which a client sending a byte every few seconds defeats.
 */
#ifndef AP_HTTP_H
#define AP_HTTP_H

#include "server/console.h"
#include "server/ingest.h"
#include "server/listen.h"
#include "server/webhook.h"
#include "server/workers.h"

#include <stdbool.h>
#include <stdint.h>

/* The admin listener's connection cap (it serves operators and a metrics scraper). */
#define HTTP_ADMIN_CONNECTIONS 64

typedef struct http_server http_server;

typedef struct http_limits {
	int max_connections; /* public listener, every client together (>= 1) */
	int per_ip;	     /* public listener, one client address; 0 = no limit */
	int headers_s;	     /* deadline for the request line and headers (>= 1) */
	int body_s;	     /* deadline for the body, counted from the headers (>= 1) */
	int threads;	     /* public listener's polling threads (>= 1; 1: no pool) */
} http_limits;

typedef struct http_config {
	listen_spec public_at;	/* LISTEN_TCP */
	listen_spec admin_at;	/* LISTEN_TCP, LISTEN_UNIX or LISTEN_OFF */
	const char *path;	/* WEBHOOK_PATH */
	wh_config wh;		/* secrets (copied; replaced by a registration) and label (must
				 * outlive the server) */
	console_config console; /* the admin listener's console (its callbacks and ud are
				 * set by http_start) */
	const char *db_path;
	ingest *ing;
	wk_pool *pool; /* may be NULL (AUTOPATCH_WORKERS=0, or no App yet: http_set_pool) */
	int workers;
	http_limits lim;
	/* After a registration on the console (the new webhook secret is in use already): hand
	 * the App to the workers, starting them (http_set_pool) if none run yet. Called on the
	 * admin listener's thread with the server; may be NULL. */
	void (*registered)(void *ud, http_server *s, const char *app_id, const char *pem);
	void *ud;
} http_config;

/* Open both listeners and serve. Fails with AP_EIO and one sentence naming the listener's
 * address, the cause and the setting to change when a socket cannot be opened (address in use,
 * directory missing, permission denied); nothing is left listening then. */
int http_start(http_server **out, const http_config *cfg);

/* The worker pool started after http_start (a registration): /healthz, /metrics and the
 * console's retry button use it from now on. Thread-safe; call at most once, with a pool that
 * outlives the server. */
void http_set_pool(http_server *s, wk_pool *pool, int workers);

/* Stop accepting new connections, wait up to wait_ms for requests in flight, then stop, remove
 * the admin unix socket file and free. Accepts NULL. */
void http_stop(http_server *s, int64_t wait_ms);

#endif
