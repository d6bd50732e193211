/* SPDX-License-Identifier: MIT */
/* sandbox/k8s_exec.c - exec over the Kubernetes WebSocket streaming protocol (see k8s_exec.h).
 *
 * libwebsockets does the TLS, the upgrade handshake (Sec-WebSocket-Key/Accept), framing,
 * masking, ping/pong and close; one lws context per exec, serviced on the caller's thread, so
 * an exec needs no thread of its own and the deadline, the cancel flag and the alive check are
 * looked at between service rounds (a 50 ms timer bounds each wait).
 */
#include "sandbox/k8s_exec.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <libwebsockets.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define K8S_STDIN_CHUNK	 (32u << 10) /* stdin bytes per message */
#define K8S_TICK_US	 (50 * LWS_US_PER_MS)
#define K8S_ALIVE_MS	 2000
#define K8S_HANDSHAKE_MS 15000 /* longest hold of tls_lock by one session's handshake */

/* libwebsockets 4.1 with OpenSSL takes fresh OpenSSL ex-data indexes each time it makes a TLS
 * context (its global init), and its handshake callbacks find their session through them: a
 * context made while another session's handshake is under way broke that handshake
 * ("connect SSL err 1", two Tester lanes exec-ing at once). So in this process TLS contexts
 * are made, their handshakes run and they are destroyed one at a time; an established
 * session no longer looks the indexes up. A server that never answers holds the lock at
 * most K8S_HANDSHAKE_MS; past it the session goes on unlocked. */
static pthread_mutex_t tls_lock = PTHREAD_MUTEX_INITIALIZER;

/* --- channel demultiplexer ------------------------------------------------------------- */

void k8s_chan_init(k8s_chan *d, bool v5)
{
	memset(d, 0, sizeof(*d));
	d->v5 = v5;
}

int k8s_chan_feed(k8s_chan *d, const void *p, size_t n, bool final, sbx_demux_fn fn, void *ud)
{
	const unsigned char *b = p;

	if (d->failed)
		return ap_error_set(AP_EIO, "exec stream: input after a protocol error");
	if (!d->in_msg) {
		if (n == 0)
			return 0; /* an empty message carries no channel: ignored */
		d->channel = b[0];
		d->in_msg = true;
		b++;
		n--;
		switch (d->channel) {
		case K8S_CHAN_STDOUT:
		case K8S_CHAN_STDERR:
		case K8S_CHAN_RESIZE:
			break;
		case K8S_CHAN_STATUS:
			if (d->has_status) {
				d->failed = true;
				return ap_error_set(AP_EIO, "exec stream: a second status message");
			}
			d->has_status = true;
			break;
		case K8S_CHAN_CLOSE:
			if (d->v5)
				break;
			d->failed = true; /* v4 has no close channel */
			return ap_error_set(AP_EIO, "exec stream: a close message on v4");
		default:
			d->failed = true;
			return ap_error_set(AP_EIO, "exec stream: a message on channel %d",
					    d->channel);
		}
	}
	if (n) {
		switch (d->channel) {
		case K8S_CHAN_STDOUT:
			fn(ud, SBX_STREAM_STDOUT, (const char *)b, n);
			break;
		case K8S_CHAN_STDERR:
			fn(ud, SBX_STREAM_STDERR, (const char *)b, n);
			break;
		case K8S_CHAN_STATUS:
			if (n > sizeof(d->status) - d->status_len) {
				d->failed = true;
				return ap_error_set(AP_EIO,
						    "exec stream: the status passed %u bytes",
						    K8S_STATUS_CAP);
			}
			memcpy(d->status + d->status_len, b, n);
			d->status_len += n;
			break;
		default:
			break; /* resize, close: nothing to keep */
		}
	}
	if (final)
		d->in_msg = false;
	return 0;
}

/* A Status string field, or "". */
static const char *sfield(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : "";
}

int k8s_chan_exit_code(const k8s_chan *d, int *code)
{
	cJSON *st, *c;
	const char *s, *reason;
	int rc = 0;

	if (!d->has_status)
		return ap_error_set(AP_EIO, "exec stream: it ended without a status");
	st = cJSON_ParseWithLength(d->status, d->status_len);
	if (!cJSON_IsObject(st)) {
		cJSON_Delete(st);
		return ap_error_set(AP_EIO, "exec stream: the status is not JSON");
	}
	s = sfield(st, "status");
	reason = sfield(st, "reason");
	if (strcmp(s, "Success") == 0) {
		*code = 0;
		goto out;
	}
	if (strcmp(s, "Failure") == 0 && strcmp(reason, "NonZeroExitCode") == 0) {
		cJSON_ArrayForEach (
		    c, cJSON_GetObjectItemCaseSensitive(
			   cJSON_GetObjectItemCaseSensitive(st, "details"), "causes")) {
			char *end;
			long v;

			if (strcmp(sfield(c, "reason"), "ExitCode") != 0)
				continue;
			v = strtol(sfield(c, "message"), &end, 10);
			if (end != sfield(c, "message") && !*end && v >= 0 && v <= 255) {
				*code = (int)v;
				goto out;
			}
		}
	}
	rc = ap_error_set(AP_EIO, "exec failed: %.300s (%.60s)", sfield(st, "message"),
			  reason[0] ? reason : s);
out:
	cJSON_Delete(st);
	return rc;
}

/* --- the WebSocket session ------------------------------------------------------------- */

struct ws_sess {
	const k8s_exec_req *r;
	const k8s_endpoint *ep;
	struct lws_context *ctx;
	struct lws *wsi;
	k8s_chan ch;
	int state;		    /* 0 connecting, 1 open, 2 closed, 3 failed to connect */
	int rc;			    /* a demultiplexer error */
	bool got_data;		    /* something arrived since the last look */
	bool ip_host;		    /* the server is an IP address: check it against the IP SANs */
	long http_status;	    /* of a refused upgrade */
	char err[AP_ERROR_MSG_MAX]; /* why the connection failed */
	char proto[24];		    /* the subprotocol the server chose */
	char host[300];		    /* the Host header: host:port ([v6]:port) */
	char auth[8192];	    /* "Bearer ..." */
	const unsigned char *in;
	size_t in_left;
	bool close_sent;		      /* v5 [255, 0] went out */
	bool in_eof;			      /* stdin_fn said the end (or stop) */
	unsigned char inbuf[K8S_STDIN_CHUNK]; /* what stdin_fn gave */
	lws_sorted_usec_list_t tick;
};

static void tick(lws_sorted_usec_list_t *sul)
{
	struct ws_sess *s = lws_container_of(sul, struct ws_sess, tick);

	lws_sul_schedule(s->ctx, 0, &s->tick, tick, K8S_TICK_US);
}

static int send_stdin(struct ws_sess *s)
{
	unsigned char buf[LWS_PRE + 1 + K8S_STDIN_CHUNK];
	size_t n;

	if (!s->in_left && s->r->stdin_fn && !s->r->stdin_data && !s->in_eof) {
		long got = s->r->stdin_fn(s->r->stdin_ud, (char *)s->inbuf, sizeof(s->inbuf));

		if (got <= 0 || (size_t)got > sizeof(s->inbuf)) {
			s->in_eof = true;
		} else {
			s->in = s->inbuf;
			s->in_left = (size_t)got;
		}
	}
	if (s->in_left) {
		n = s->in_left > K8S_STDIN_CHUNK ? K8S_STDIN_CHUNK : s->in_left;
		buf[LWS_PRE] = K8S_CHAN_STDIN;
		memcpy(buf + LWS_PRE + 1, s->in, n);
		if (lws_write(s->wsi, buf + LWS_PRE, n + 1, LWS_WRITE_BINARY) < (int)(n + 1))
			return -1;
		s->in += n;
		s->in_left -= n;
	} else if (s->ch.v5 && !s->close_sent) {
		/* v5: "I will not write to channel 0 again": the command sees EOF. v4 has no way
		 * to say it (the caller bounds stdin inside the box instead). */
		buf[LWS_PRE] = K8S_CHAN_CLOSE;
		buf[LWS_PRE + 1] = K8S_CHAN_STDIN;
		if (lws_write(s->wsi, buf + LWS_PRE, 2, LWS_WRITE_BINARY) < 2)
			return -1;
		s->close_sent = true;
	}
	if (s->in_left || (s->r->stdin_fn && !s->r->stdin_data && !s->in_eof) ||
	    (s->ch.v5 && !s->close_sent))
		lws_callback_on_writable(s->wsi);
	return 0;
}

static void on_out(void *ud, int stream, const char *p, size_t n)
{
	struct ws_sess *s = ud;

	s->r->out_fn(s->r->ud, stream, p, n);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct ws_sess *s = wsi ? lws_get_opaque_user_data(wsi) : NULL;
	int rc;

	if (!s)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION: {
		X509_STORE_CTX *x = user;

		/* An IP address is checked against the certificate's IP SANs here (lws checks
		 * host names only); the chain itself was verified by OpenSSL (len). */
		if (len && s->ip_host && X509_STORE_CTX_get_error_depth(x) == 0 &&
		    X509_check_ip_asc(X509_STORE_CTX_get_current_cert(x), s->ep->host, 0) != 1) {
			X509_STORE_CTX_set_error(x, X509_V_ERR_IP_ADDRESS_MISMATCH);
			snprintf(s->err, sizeof(s->err),
				 "the server certificate is not valid for %s", s->ep->host);
			return 1;
		}
		return 0;
	}
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = in, *end = *p + len;

		if (s->auth[0] && lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION,
							       (unsigned char *)s->auth,
							       (int)strlen(s->auth), p, end))
			return -1;
		return 0;
	}
	case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
		/* The answer's headers are still there (no longer once established): which
		 * subprotocol the server chose. */
		if (lws_hdr_copy(wsi, s->proto, sizeof(s->proto), WSI_TOKEN_PROTOCOL) < 0)
			s->proto[0] = '\0';
		return 0;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		k8s_chan_init(&s->ch, strcmp(s->proto, K8S_PROTO_V5) == 0);
		s->state = 1;
		if (s->r->stdin_data || s->r->stdin_fn)
			lws_callback_on_writable(wsi);
		return 0;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		s->got_data = true;
		rc = k8s_chan_feed(&s->ch, in, len, lws_is_final_fragment(wsi), on_out, s);
		if (rc) {
			s->rc = rc;
			return -1;
		}
		return 0;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		return send_stdin(s);
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		s->http_status = lws_http_client_http_response(wsi);
		if (!s->err[0])
			ap_excerpt(s->err, sizeof(s->err), in ? (const char *)in : "no detail");
		s->state = 3;
		s->wsi = NULL;
		return 0;
	case LWS_CALLBACK_CLIENT_CLOSED:
		s->state = 2;
		s->wsi = NULL;
		return 0;
	case LWS_CALLBACK_WSI_DESTROY:
		if (s->state < 2)
			s->state = s->state == 0 ? 3 : 2;
		s->wsi = NULL;
		return 0;
	default:
		return 0;
	}
}

static const struct lws_protocols protocols[] = {
    {"autopatch-exec", callback, 0, 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void lws_to_log(int level, const char *line)
{
	size_t n = strlen(line);

	(void)level; /* errors and warnings alike go to the debug log (log_init) */
	while (n && line[n - 1] == '\n')
		n--;
	ap_debug("libwebsockets: %.*s", (int)n, line);
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init(void)
{
	lws_set_log_level(LLL_ERR | LLL_WARN, lws_to_log);
}

static int refused(struct ws_sess *s, long *http_status)
{
	long st = s->http_status;

	if (http_status)
		*http_status = st;
	if (st == 401 || st == 403)
		return ap_error_set(AP_EDENIED, "the exec upgrade was refused (%ld)", st);
	if (st == 404)
		return ap_error_set(AP_ENOTFOUND, "the exec upgrade found no such pod (404)");
	if (st > 0)
		return ap_error_set(AP_EHTTP, "the exec upgrade was refused (%ld): %s", st, s->err);
	return ap_error_set(AP_EUNAVAIL, "cannot reach the Kubernetes API at %s:%d for exec: %s",
			    s->ep->host, s->ep->port, s->err);
}

/* The libwebsockets context: TLS credentials from the endpoint, and a handshake buffer that
 * holds the whole request line (the command travels in it). NULL on failure. */
static struct lws_context *make_context(const k8s_endpoint *ep, size_t path_len)
{
	struct lws_context_creation_info info;

	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.options = ep->tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0;
	info.fd_limit_per_thread = 8;
	/* The handshake is built in this buffer (default 4 KiB): a longer request line was cut
	 * in the middle of an escape. */
	info.pt_serv_buf_size = (unsigned int)(path_len + 16384);
	info.max_http_header_data2 = (unsigned int)(path_len + 16384);
	if (ep->ca_pem) {
		info.client_ssl_ca_mem = ep->ca_pem;
		info.client_ssl_ca_mem_len = (unsigned int)strlen(ep->ca_pem);
	}
	if (ep->cert_pem && ep->key_pem) {
		info.client_ssl_cert_mem = ep->cert_pem;
		info.client_ssl_cert_mem_len = (unsigned int)strlen(ep->cert_pem);
		info.client_ssl_key_mem = ep->key_pem;
		info.client_ssl_key_mem_len = (unsigned int)strlen(ep->key_pem);
	}
	return lws_create_context(&info);
}

/* Start the upgrade request on s->ctx. A failure to start is s->state 3 with s->err. */
static void connect_exec(struct ws_sess *s, const char *path)
{
	const k8s_endpoint *ep = s->ep;
	struct lws_client_connect_info ci;

	memset(&ci, 0, sizeof(ci));
	ci.context = s->ctx;
	ci.address = ep->host;
	ci.port = ep->port;
	ci.path = path;
	/* Host with the port, as any HTTP client sends it (lws drops the port itself for SNI and
	 * the certificate check); no Origin: this is no browser (lws would send http:// even
	 * over TLS). */
	/* The host is at most 253 bytes (checked when the server URL was read): fits the 300. */
	snprintf(s->host, sizeof(s->host), strchr(ep->host, ':') ? "[%s]:%d" : "%s:%d", ep->host,
		 ep->port);
	ci.host = s->host;
	ci.origin = NULL;
	ci.protocol = s->r->protocols;
	ci.local_protocol_name = protocols[0].name;
	ci.alpn = "http/1.1"; /* the API server upgrades HTTP/1.1 only */
	ci.opaque_user_data = s;
	ci.pwsi = &s->wsi;
	if (ep->tls) {
		ci.ssl_connection = LCCSCF_USE_SSL;
		if (s->ip_host)
			ci.ssl_connection |= LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK;
		if (ep->insecure)
			ci.ssl_connection |= LCCSCF_ALLOW_SELFSIGNED | LCCSCF_ALLOW_INSECURE |
					     LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK;
	}
	if (!lws_client_connect_via_info(&ci) && s->state == 0) {
		snprintf(s->err, sizeof(s->err), "the connection could not be started");
		s->state = 3;
	}
}

/* Serve the connection until its state reaches until (1: established or ended; 2: the
 * command ended or was refused), a frame error (s->rc), cancel, the deadline, the box found
 * dead (K8S_EXEC_DIED) or, without an error, the time limit_ms. 0 or that code. */
static int pump(struct ws_sess *s, int until, long long limit_ms)
{
	const k8s_exec_req *r = s->r;
	long long next_alive = ap_mono_ms() + K8S_ALIVE_MS;

	while (s->state < until && !s->rc && ap_mono_ms() < limit_ms) {
		if (r->cancel && *r->cancel)
			return ap_error_set(AP_ECANCELLED, "the command was cancelled");
		if (ap_mono_ms() >= r->deadline_ms)
			return ap_error_set(AP_ETIMEOUT, "the command passed its deadline");
		if (s->state == 1 && r->alive_fn && ap_mono_ms() >= next_alive) {
			if (!r->alive_fn(r->ud))
				return K8S_EXEC_DIED;
			next_alive = ap_mono_ms() + K8S_ALIVE_MS;
		}
		s->got_data = false;
		if (lws_service(s->ctx, 0) < 0)
			break;
		if (!s->got_data && s->state == 1 && r->idle_fn)
			r->idle_fn(r->ud);
	}
	return s->rc;
}

/* The session for r in *out (the caller frees it): its stdin, the bearer header, whether
 * the host is an address. 0, AP_ENOMEM or AP_ETOOBIG. */
static int sess_new(const k8s_endpoint *ep, const k8s_exec_req *r, struct ws_sess **out)
{
	struct ws_sess *s = calloc(1, sizeof(*s));
	struct in6_addr a6;

	*out = NULL;
	if (!s)
		return ap_error_set(AP_ENOMEM, "out of memory");
	s->r = r;
	s->ep = ep;
	s->in = r->stdin_data;
	s->in_left = r->stdin_data ? r->stdin_len : 0;
	s->ip_host =
	    inet_pton(AF_INET, ep->host, &a6) == 1 || inet_pton(AF_INET6, ep->host, &a6) == 1;
	if (ep->token &&
	    snprintf(s->auth, sizeof(s->auth), "Bearer %s", ep->token) >= (int)sizeof(s->auth)) {
		OPENSSL_cleanse(s->auth, sizeof(s->auth));
		free(s);
		return ap_error_set(AP_ETOOBIG, "the bearer token is too long");
	}
	*out = s;
	return 0;
}

int k8s_exec_run(const k8s_endpoint *ep, const k8s_exec_req *r, int *code, char *proto,
		 long *http_status)
{
	struct ws_sess *s = NULL;
	char *path = NULL;
	size_t path_len;
	int rc = 0;

	if (http_status)
		*http_status = 0;
	proto[0] = '\0';
	pthread_once(&log_once, log_init);
	/* The command travels in the request line: as long as it is (the API server takes 1 MiB
	 * of headers), but bounded. */
	path_len = strlen(ep->prefix) + strlen(r->path);
	if (path_len > K8S_EXEC_PATH_MAX)
		return ap_error_set(AP_ETOOBIG, "the exec request is too long");
	if (!(path = malloc(path_len + 1)))
		return ap_error_set(AP_ENOMEM, "out of memory");
	memcpy(path, ep->prefix, strlen(ep->prefix));
	memcpy(path + strlen(ep->prefix), r->path, strlen(r->path) + 1);
	if ((rc = sess_new(ep, r, &s)))
		goto out_free;
	if (ep->tls)
		pthread_mutex_lock(&tls_lock);
	if (!(s->ctx = make_context(ep, path_len))) {
		rc = ap_error_set(AP_EIO, "cannot set up the exec WebSocket (TLS credentials?)");
		goto out_unlock;
	}
	lws_sul_schedule(s->ctx, 0, &s->tick, tick, K8S_TICK_US);
	connect_exec(s, path);
	rc = pump(s, 1, ap_mono_ms() + K8S_HANDSHAKE_MS);
	if (ep->tls)
		pthread_mutex_unlock(&tls_lock);
	if (rc || (rc = pump(s, 2, LLONG_MAX)))
		goto out_destroy;
	if (s->state == 3) {
		rc = refused(s, http_status);
		goto out_destroy;
	}
	snprintf(proto, 24, "%s", s->proto);
	rc = k8s_chan_exit_code(&s->ch, code);
out_destroy:
	lws_sul_schedule(s->ctx, 0, &s->tick, tick, LWS_SET_TIMER_USEC_CANCEL);
	if (ep->tls)
		pthread_mutex_lock(&tls_lock);
	lws_context_destroy(s->ctx);
out_unlock:
	if (ep->tls)
		pthread_mutex_unlock(&tls_lock);
out_free:
	if (s)
		OPENSSL_cleanse(s->auth, sizeof(s->auth));
	free(s);
	free(path);
	return rc;
}
