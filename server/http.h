/* SPDX-License-Identifier: MIT */
/* server/http.h - the HTTP front end on libmicrohttpd: the webhook endpoint, /healthz,
 * /metrics and the status page.
 *
 * One polling thread (epoll) serves every connection. A webhook request is verified and
 * routed on that thread (webhook.c), then its connection is suspended while the ingest writer
 * commits it; the writer resumes it and the answer goes out only after the COMMIT.
 */
#ifndef AP_HTTP_H
#define AP_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "server/ingest.h"
#include "server/webhook.h"
#include "server/workers.h"

typedef struct http_server http_server;

typedef struct http_config {
	const char *bind; /* numeric IPv4 or IPv6 address */
	int port;
	const char *path; /* WEBHOOK_PATH */
	wh_config wh;	  /* secrets and label; strings must outlive the server */
	const char *db_path;
	ingest *ing;
	wk_pool *pool; /* may be NULL (AUTOPATCH_WORKERS=0) */
	int workers;
	bool status_public; /* serve GET / (repository names, errors) to any client */
} http_config;

/* True for a loopback client (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). The status page,
 * which names repositories, is served only to those unless status_public is set. */
bool http_is_local(const struct sockaddr *sa);

/* Listen and serve. Fails (AP_EIO with a sentence) when the address cannot be bound. */
int http_start(http_server **out, const http_config *cfg);

/* Stop accepting new connections, wait up to wait_ms for requests in flight, then stop and
 * free. Accepts NULL. */
void http_stop(http_server *s, int64_t wait_ms);

#endif
