/* SPDX-License-Identifier: MIT */
/* server/http.c - libmicrohttpd front end: the public and the admin listener (see http.h). */
#include "server/http.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/jsonnum.h"
#include "common/log.h"
#include "server/console.h"
#include "server/deadline.h"
#include "server/metrics.h"
#include "server/queue.h"
#include "server/queue_view.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAGE_CAP (1024 * 1024)
/* libmicrohttpd's idle timeout (s); the deadlines of http_limits are the tighter bound. */
#define IDLE_TIMEOUT_S 30
/* How often the deadline watcher looks at every connection. */
#define DEADLINE_TICK_MS 100

/* One listener: its own daemon (and polling threads) and its own database reader. */
struct listener {
	http_server *s;
	bool admin;	/* the admin listener: status page and metrics, no webhooks */
	listen_spec at; /* where it listens; the unix socket file is removed at stop */
	struct MHD_Daemon *d;
	queue *rq; /* reader connection for the GET endpoints (its calls take the queue's lock) */
};

/* The webhook secrets in use: immutable once published; replaced whole after a
 * registration (http_server.sec under sec_lock), freed by the last reader. */
struct secrets {
	atomic_int refs;
	char *cur, *prev;
};

struct http_server {
	http_config cfg;
	struct listener pub, adm;
	console *con;		  /* the admin listener's pages (NULL when it is off) */
	pthread_mutex_t sec_lock; /* guards sec (the pointer) */
	struct secrets *sec;
	dl_tracker *dl;		 /* the header and body deadlines of every connection */
	atomic_int inflight;	 /* webhook requests begun and not yet completed */
	atomic_int suspended;	 /* of those, waiting for the ingest writer's COMMIT */
	_Atomic(wk_pool *) pool; /* cfg.pool, or the one a registration started */
	atomic_int workers;
};

enum req_state { REQ_BODY, REQ_WAIT, REQ_DONE };

struct req {
	http_server *s;
	struct MHD_Connection *conn;
	dl_conn *dc; /* the connection's deadline (NULL only if it is untracked) */
	int64_t start_ns;
	bool is_hook;
	bool is_form; /* a POST to the console: body buffered, then console_handle */
	enum req_state state;
	ap_buf body;
	bool too_big;
	wh_decision dec;
	ing_item item;
};

static enum MHD_Result respond(struct MHD_Connection *c, int status, const char *type,
			       const char *body, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

/* {"message": msg, ...}: every answer of the webhook endpoint is a short JSON object. */
static enum MHD_Result respond_json(struct MHD_Connection *c, int status, const char *msg,
				    int64_t job)
{
	cJSON *o = cJSON_CreateObject();
	char *text = NULL;
	enum MHD_Result ret;

	if (o) {
		cJSON_AddStringToObject(o, "message", msg);
		if (job)
			ap_json_add_int(o, "job", job);
		text = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
	}
	if (!text)
		return respond(c, 500, "application/json", "{\"message\":\"out of memory\"}", 27);
	ret = respond(c, status, "application/json", text, strlen(text));
	free(text);
	return ret;
}

static const char *reject_outcome(int status)
{
	switch (status) {
	case 400:
		return "bad_request";
	case 401:
		return "unauthorized";
	case 405:
		return "method_not_allowed";
	case 413:
		return "too_large";
	case 415:
		return "unsupported_media_type";
	default:
		return "error";
	}
}

static const char *header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result finish_hook(struct req *r, int status, const char *outcome, const char *msg,
				   int64_t job)
{
	const char *event = header(r->conn, "X-GitHub-Event");
	enum MHD_Result ret;

	ret = respond_json(r->conn, status, msg, job);
	metrics_delivery(event, outcome);
	metrics_latency((double)(dl_now_ns() - r->start_ns) / 1e9);
	r->state = REQ_DONE;
	return ret;
}

/* Writer thread: the batch holding this item committed (or failed). */
static void item_done(ing_item *item)
{
	struct req *r = item->ud;

	atomic_fetch_sub(&r->s->suspended, 1);
	MHD_resume_connection(r->conn);
}

static enum MHD_Result answer_stored(struct req *r)
{
	q_delivery *d = &r->item.d;
	const char *delivery = d->delivery;
	char msg[256];

	switch (d->result) {
	case Q_QUEUED:
		ap_log(AP_LOG_INFO, delivery, d->job_id, "job queued: %s", r->dec.reason);
		return finish_hook(r, 202, "queued", "queued", d->job_id);
	case Q_DUPLICATE:
		ap_log(AP_LOG_INFO, delivery, 0, "duplicate delivery: nothing to do");
		return finish_hook(r, 200, "duplicate", "duplicate delivery", 0);
	case Q_ACTIVE:
		ap_log(AP_LOG_INFO, delivery, d->job_id, "%s: a job is already active",
		       r->dec.reason);
		return finish_hook(r, 200, "active_job", "a job for this issue is already active",
				   d->job_id);
	case Q_CANCELLED:
		snprintf(msg, sizeof(msg), "cancel: %d job(s) affected", d->ncancelled);
		ap_log(AP_LOG_INFO, delivery, 0, "%s (%s)", msg, r->dec.reason);
		return finish_hook(r, 200, "cancel", msg, 0);
	case Q_RECORDED:
		ap_log(AP_LOG_INFO, delivery, 0, "ignored: %s", r->dec.reason);
		/* Only shown to the sender; the whole reason is in the log line above. */
		snprintf(msg, sizeof(msg), "ignored: %.200s", r->dec.reason);
		return finish_hook(r, 200, "ignored", msg, 0);
	default:
		ap_log(AP_LOG_ERROR, delivery, 0, "delivery could not be stored");
		return finish_hook(r, 503, "error", "delivery could not be stored; retry", 0);
	}
}

static void secrets_put(struct secrets *sec)
{
	if (!sec || atomic_fetch_sub(&sec->refs, 1) != 1)
		return;
	for (char **p = (char *[]){sec->cur, sec->prev}, **e = p + 2; p < e; p++)
		if (*p) {
			memset(*p, 0, strlen(*p));
			free(*p);
		}
	free(sec);
}

static struct secrets *secrets_new(const char *cur, const char *prev)
{
	struct secrets *sec = calloc(1, sizeof(*sec));

	if (!sec)
		return NULL;
	atomic_init(&sec->refs, 1);
	sec->cur = cur ? strdup(cur) : NULL;
	sec->prev = prev ? strdup(prev) : NULL;
	if ((cur && !sec->cur) || (prev && !sec->prev)) {
		secrets_put(sec);
		return NULL;
	}
	return sec;
}

/* A reference to the secrets in use (release with secrets_put). */
static struct secrets *secrets_get(http_server *s)
{
	struct secrets *sec;

	pthread_mutex_lock(&s->sec_lock);
	sec = s->sec;
	if (sec)
		atomic_fetch_add(&sec->refs, 1);
	pthread_mutex_unlock(&s->sec_lock);
	return sec;
}

/* The console stored a new App: verify with its secret from the next delivery on, and give
 * the workers its id and key. */
static void on_registered(void *ud, const console_app *app)
{
	http_server *s = ud;
	struct secrets *sec = secrets_new(app->webhook_secret, NULL), *old;

	if (!sec) {
		ap_err("out of memory: the new webhook secret is not in use until a restart");
	} else {
		pthread_mutex_lock(&s->sec_lock);
		old = s->sec;
		s->sec = sec;
		pthread_mutex_unlock(&s->sec_lock);
		secrets_put(old);
	}
	if (s->cfg.registered)
		s->cfg.registered(s->cfg.ud, s, app->app_id, app->pem);
}

void http_set_pool(http_server *s, wk_pool *pool, int workers)
{
	atomic_store(&s->workers, workers);
	atomic_store(&s->pool, pool);
}

static void on_console_queued(void *ud)
{
	http_server *s = ud;

	wk_notify(atomic_load(&s->pool));
}

static enum MHD_Result hook_complete(struct req *r)
{
	http_server *s = r->s;
	wh_request wreq = {
	    .method = "POST",
	    .event = header(r->conn, "X-GitHub-Event"),
	    .delivery = header(r->conn, "X-GitHub-Delivery"),
	    .signature = header(r->conn, "X-Hub-Signature-256"),
	    .content_type = header(r->conn, MHD_HTTP_HEADER_CONTENT_TYPE),
	    .body = r->body.data,
	    .len = r->body.len,
	    .body_too_big = r->too_big,
	};
	q_delivery *d = &r->item.d;

	struct secrets *sec = secrets_get(s);
	wh_config wc = {{sec ? sec->cur : NULL, sec ? sec->prev : NULL}, s->cfg.wh.label};

	/* The whole request is in: what remains is the server's work, not the client's. */
	dl_arm(r->dc, DL_BODY, 0);
	wh_handle(&wc, &wreq, &r->dec);
	secrets_put(sec);
	if (r->dec.action == WH_REJECT) {
		ap_log(AP_LOG_INFO,
		       wreq.delivery && strlen(wreq.delivery) <= WH_DELIVERY_MAX ? wreq.delivery
										 : NULL,
		       0, "rejected with %d: %s", r->dec.status, r->dec.reason);
		return finish_hook(r, r->dec.status, reject_outcome(r->dec.status), r->dec.reason,
				   0);
	}
	*d = (q_delivery){
	    .delivery = wreq.delivery,
	    .event = wreq.event,
	    .body = wreq.body,
	    .len = wreq.len,
	    .kind = r->dec.action == WH_TRIGGER	 ? Q_TRIGGER
		    : r->dec.action == WH_CANCEL ? Q_CANCEL
						 : Q_RECORD,
	    .note = r->dec.action == WH_IGNORE ? r->dec.reason : NULL,
	    .repo = r->dec.repo,
	    .repo_id = r->dec.repo_id,
	    .installation_id = r->dec.installation_id,
	    .issue = r->dec.issue,
	    .trigger = r->dec.trigger,
	    .feedback = r->dec.feedback,
	    .title = r->dec.title,
	    .comment_id = r->dec.comment_id,
	};
	r->item.done = item_done;
	r->item.ud = r;
	r->state = REQ_WAIT;
	/* Suspend before submitting: the writer may resume us before this function returns. */
	atomic_fetch_add(&s->suspended, 1);
	MHD_suspend_connection(r->conn);
	ing_submit(s->cfg.ing, &r->item);
	return MHD_YES;
}

static enum MHD_Result on_hook(struct req *r, const char *upload, size_t *upload_size)
{
	if (r->state == REQ_WAIT)
		return answer_stored(r);
	/* A body that outlives its deadline closes the connection (the watcher also cuts it
	 * when no byte arrives at all). */
	if (dl_enforce(r->s->dl, r->dc, dl_now_ns()))
		return MHD_NO;
	if (r->state == REQ_DONE)
		return MHD_YES;
	if (*upload_size) {
		if (!r->too_big && ap_buf_add(&r->body, upload, *upload_size) != 0) {
			/* Over the cap: stop buffering, keep draining, answer 413 at the end. */
			r->too_big = true;
			ap_buf_release(&r->body);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	return hook_complete(r);
}

static enum MHD_Result healthz(struct listener *l, struct MHD_Connection *c)
{
	http_server *s = l->s;
	char body[256];
	q_stats st;

	if (q_get_stats(l->rq, &st))
		return respond(c, 503, "application/json",
			       "{\"ok\":false,\"message\":\"database unavailable\"}", 45);
	snprintf(body, sizeof(body),
		 "{\"ok\":true,\"queue_depth\":%lld,\"running\":%lld,\"workers\":%d,\"busy\":%d}",
		 (long long)st.queued, (long long)st.running, atomic_load(&s->workers),
		 wk_busy(atomic_load(&s->pool)));
	return respond(c, 200, "application/json", body, strlen(body));
}

static enum MHD_Result metrics_page(struct listener *l, struct MHD_Connection *c)
{
	http_server *s = l->s;
	ap_buf b = AP_BUF_INIT(PAGE_CAP);
	q_stats st;
	enum MHD_Result ret;

	if (q_get_stats(l->rq, &st) ||
	    metrics_render(&b, &st, atomic_load(&s->workers), wk_busy(atomic_load(&s->pool)),
			   ing_max_batch(s->cfg.ing))) {
		ap_buf_release(&b);
		return respond(c, 500, "text/plain", "metrics unavailable\n", 20);
	}
	ret = respond(c, 200, "text/plain; version=0.0.4", ap_buf_str(&b), b.len);
	ap_buf_release(&b);
	return ret;
}

/* The deadline of c's connection (set when it was accepted). */
static dl_conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static int64_t after_s(int seconds)
{
	return dl_now_ns() + (int64_t)seconds * 1000000000;
}

/* True when the request announces a body (the headers are in when this is asked). */
static bool has_body(struct MHD_Connection *c)
{
	const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);

	return header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING) || (cl && strtoull(cl, NULL, 10) > 0);
}

/* The first call for a request to the webhook path: the headers are in. */
static enum MHD_Result hook_begin(http_server *s, struct MHD_Connection *c, const char *method,
				  void **con_cls)
{
	const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct req *r = calloc(1, sizeof(*r));

	if (!r)
		return MHD_NO;
	r->s = s;
	r->conn = c;
	r->dc = conn_of(c);
	r->is_hook = true;
	r->start_ns = dl_now_ns();
	r->dec = (wh_decision)WH_DECISION_INIT;
	ap_buf_init(&r->body, WH_BODY_MAX);
	*con_cls = r;
	atomic_fetch_add(&s->inflight, 1);
	dl_arm(r->dc, DL_BODY, after_s(s->cfg.lim.body_s));
	if (strcmp(method, "POST") != 0)
		return finish_hook(r, 405, "method_not_allowed", "only POST is accepted here", 0);
	/* Refuse an announced oversize body before reading any of it. */
	if (cl && strtoull(cl, NULL, 10) > WH_BODY_MAX)
		return finish_hook(r, 413, "too_large", "payload is larger than 25 MiB", 0);
	return MHD_YES;
}

/* The admin listener's pages. */
static enum MHD_Result admin_route(struct listener *l, struct MHD_Connection *c, const char *url,
				   const char *method, bool get)
{
	if (strcmp(url, "/healthz") == 0)
		return get ? healthz(l, c) : respond_json(c, 405, "use GET", 0);
	if (strcmp(url, "/metrics") == 0 && l->s->con && !console_may_read_metrics(l->s->con, c))
		return respond_json(c, 401, "sign in at /login as an operator to read /metrics", 0);
	if (strcmp(url, "/metrics") == 0)
		return get ? metrics_page(l, c) : respond_json(c, 405, "use GET", 0);
	if (l->s->con)
		return console_handle(l->s->con, c, l->rq, url, get ? "GET" : method, NULL, 0);
	return respond_json(c, 404, "not found", 0);
}

/* A POST to the console: buffer its (small) form body, then answer. */
static enum MHD_Result on_form(struct req *r, struct listener *l, const char *url,
			       const char *upload, size_t *upload_size)
{
	if (dl_enforce(r->s->dl, r->dc, dl_now_ns()))
		return MHD_NO;
	if (*upload_size) {
		if (!r->too_big && ap_buf_add(&r->body, upload, *upload_size) != 0) {
			r->too_big = true;
			ap_buf_release(&r->body);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	dl_arm(r->dc, DL_BODY, 0);
	if (r->too_big)
		return respond_json(r->conn, 413, "form too large", 0);
	return console_handle(r->s->con, r->conn, l->rq, url, "POST", ap_buf_str(&r->body),
			      r->body.len);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct listener *l = cls;
	http_server *s = l->s;
	struct req *r = *con_cls;
	bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;

	(void)version;
	if (r && r->is_form)
		return on_form(r, l, url, upload, upload_size);
	if (r)
		return on_hook(r, upload, upload_size);
	if (!l->admin && strcmp(url, s->cfg.path) == 0)
		return hook_begin(s, c, method, con_cls);
	if (l->admin && s->con && strcmp(method, "POST") == 0) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->s = s;
		r->conn = c;
		r->dc = conn_of(c);
		r->is_form = true;
		r->dec = (wh_decision)WH_DECISION_INIT;
		ap_buf_init(&r->body, CONSOLE_BODY_MAX);
		*con_cls = r;
		atomic_fetch_add(&s->inflight, 1);
		dl_arm(r->dc, DL_BODY, after_s(s->cfg.lim.body_s));
		return MHD_YES;
	}
	if (*upload_size) { /* a body sent to a GET endpoint: drain it */
		if (dl_enforce(s->dl, conn_of(c), dl_now_ns()))
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	/* Answered from the headers alone; a body still announced must arrive in time. */
	if (has_body(c))
		dl_arm(conn_of(c), DL_BODY, after_s(s->cfg.lim.body_s));
	else
		dl_arm(conn_of(c), DL_BODY, 0);
	if (l->admin)
		return admin_route(l, c, url, method, get);
	/* Public: the webhook path and the health check, nothing else. */
	if (strcmp(url, "/healthz") == 0)
		return get ? healthz(l, c) : respond_json(c, 405, "use GET", 0);
	return respond_json(c, 404, "not found", 0);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct listener *l = cls;
	http_server *s = l->s;
	struct req *r = *con_cls;

	(void)toe;
	/* A kept-alive connection owes the next request's headers within the deadline. */
	dl_arm(conn_of(c), DL_HEADERS, after_s(s->cfg.lim.headers_s));
	if (!r)
		return;
	wh_decision_release(&r->dec);
	ap_buf_release(&r->body);
	free(r);
	*con_cls = NULL;
	atomic_fetch_sub(&s->inflight, 1);
}

/* Accepted: track the connection with its header deadline. Closed (before libmicrohttpd
 * closes the socket): forget it. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct listener *l = cls;
	http_server *s = l->s;
	const union MHD_ConnectionInfo *ci;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		dl_untrack(s->dl, *socket_context);
		*socket_context = NULL;
		return;
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	*socket_context =
	    dl_track(s->dl, ci->connect_fd, DL_HEADERS, after_s(s->cfg.lim.headers_s));
	if (!*socket_context) /* out of memory: no connection without a deadline */
		shutdown(ci->connect_fd, SHUT_RDWR);
}

static void on_cut(enum dl_phase phase)
{
	metrics_deadline_cut(phase == DL_BODY);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* libmicrohttpd's own messages, as debug lines of our log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap); /* only logged: libmicrohttpd's are short */
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	ap_log(AP_LOG_DEBUG, NULL, 0, "http: %s", msg);
}

/* Open l->at and start its daemon. fix is the sentence's advice when the socket cannot be
 * opened. The admin listener has its own connection cap and no per-address limit. */
static int listener_start(struct listener *l, const char *fix)
{
	const http_limits *lim = &l->s->cfg.lim;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	int fd, rc;

	if ((rc = q_open(&l->rq, l->s->cfg.db_path, Q_OPEN_CREATE)))
		return rc;
	if ((rc = listen_open(&fd, &l->at, fix)))
		return rc;
	if (l->at.kind == LISTEN_TCP && l->at.addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	l->d = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, l, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)(l->admin ? HTTP_ADMIN_CONNECTIONS : lim->max_connections),
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)(l->admin ? 0 : lim->per_ip),
	    MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)(l->admin ? 1 : lim->threads),
	    MHD_OPTION_END);
	if (!l->d) {
		/* The socket is not closed here: libmicrohttpd may have closed it already, and
		 * start-up is failing anyway. */
		listen_remove(&l->at);
		return ap_error_set(AP_EIO, "cannot start the HTTP server on %s: %s", l->at.text,
				    fix);
	}
	return 0;
}

/* Stop accepting on l (its listening socket is closed; kept connections still finish). */
static void listener_quiesce(struct listener *l)
{
	MHD_socket fd;

	if (!l->d)
		return;
	fd = MHD_quiesce_daemon(l->d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

static void listener_stop(struct listener *l)
{
	if (l->d)
		MHD_stop_daemon(l->d);
	l->d = NULL;
	listen_remove(&l->at);
	q_close(l->rq);
	l->rq = NULL;
}

/* Stop both daemons (their close notifications untrack every connection) and free. */
static void teardown(http_server *s)
{
	console_stop_streams(s->con, 2000);
	listener_stop(&s->adm);
	listener_stop(&s->pub);
	console_free(s->con);
	dl_free(s->dl);
	secrets_put(s->sec);
	pthread_mutex_destroy(&s->sec_lock);
	free(s);
}

int http_start(http_server **out, const http_config *cfg)
{
	http_server *s;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ap_error_set(AP_ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->pub = (struct listener){.s = s, .admin = false, .at = cfg->public_at};
	s->adm = (struct listener){.s = s, .admin = true, .at = cfg->admin_at};
	atomic_init(&s->pool, cfg->pool);
	atomic_init(&s->workers, cfg->workers);
	pthread_mutex_init(&s->sec_lock, NULL);
	s->sec = secrets_new(cfg->wh.secrets[0], cfg->wh.secrets[1]);
	if (!s->sec) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto fail;
	}
	if (s->adm.at.kind != LISTEN_OFF) {
		console_config cc = cfg->console;

		cc.registered = on_registered;
		cc.queued = on_console_queued;
		cc.ud = s;
		if ((rc = console_new(&s->con, &cc)))
			goto fail;
	}
	if ((rc = dl_new(&s->dl, DEADLINE_TICK_MS, on_cut)))
		goto fail;
	if ((rc = listener_start(&s->pub, "set PORT or AUTOPATCH_BIND to a free address")))
		goto fail;
	if (s->adm.at.kind != LISTEN_OFF &&
	    (rc = listener_start(&s->adm,
				 "set AUTOPATCH_ADMIN_LISTEN to a free ADDRESS:PORT, to unix:PATH "
				 "in a directory autopatch can write, or to off")))
		goto fail;
	*out = s;
	return 0;
fail:
	teardown(s);
	return rc;
}

void http_stop(http_server *s, int64_t wait_ms)
{
	/* libmicrohttpd aborts if stopped with a suspended connection, and those only wait for
	 * the writer, which always answers (a COMMIT or, after the busy timeout, a failure). */
	const int64_t suspended_max_ms = 30000;
	int64_t waited = 0;

	if (!s)
		return;
	listener_quiesce(&s->pub);
	listener_quiesce(&s->adm);
	console_stop_streams(s->con, wait_ms < 2000 ? wait_ms : 2000);
	for (; waited < suspended_max_ms; waited += 10) {
		if (atomic_load(&s->suspended) == 0 &&
		    (atomic_load(&s->inflight) == 0 || waited >= wait_ms))
			break;
		usleep(10000);
	}
	if (atomic_load(&s->suspended) > 0) {
		/* The writer is wedged: leave the daemons to the exiting process. */
		ap_err("%d request(s) still wait for the database; not stopping HTTP cleanly",
		       atomic_load(&s->suspended));
		listen_remove(&s->adm.at);
		return;
	}
	teardown(s);
}
