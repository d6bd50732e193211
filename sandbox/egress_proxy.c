/* SPDX-License-Identifier: MIT */
/* sandbox/egress_proxy.c - autopatch-egress-proxy: the allow-list HTTP proxy of one sandbox.
 *
 * A small stand-alone program (libc only, plus sandbox/egress_policy.c and common/err.c) that
 * runs in its own hardened container, attached to the job's Internal network (where the
 * sandbox can reach it) and to a normal bridge (where it can reach the mirror). It is started
 * by sandbox/egress.c with the binary bind-mounted read-only into a container of the sandbox
 * image, so nothing has to be installed or built into an image.
 *
 * Why our own proxy rather than Debian's squid or tinyproxy: the policy we need is small
 * (exact host:port, no IP literals in any spelling, resolve once here, refuse the name if any
 * answer is not public, connect only to the checked addresses, one request per plain-HTTP
 * connection). tinyproxy filters names by regex only and cannot refuse by resolved address;
 * squid can (dst ACLs) but resolves for the ACL and the connection through its own cache and
 * needs regex ACLs for literal spellings; both need a second image built with a package
 * manager, a generated config per job and a log format to parse. This program shares its
 * policy code with the host, is tested directly by the unit tests, and writes one JSON line
 * per decision that autopatch relays to its own log. See docs/egress.md.
 *
 * Protocol: "CONNECT host:port" opens a tunnel for TLS, on every allowed port: the client's
 * first bytes must be a TLS ClientHello whose server name (SNI) is the CONNECT host, checked
 * (egp_sni_from_client_hello) before they are forwarded unchanged, so a tunnel to an allowed
 * address cannot reach another site behind it (domain fronting) or carry another protocol;
 * TLS then stays end to end. "METHOD http://host[:port]/path" forwards exactly one request
 * (rewritten to origin-form, Host set to the allowed name, hop-by-hop headers removed,
 * "Connection: close") and relays the response.
 * Everything else gets 400 or 403 with the reason in the body and one JSON line on stderr.
 *
 * Usage: autopatch-egress-proxy (--listen-net CIDR | --listen ADDR | --listen-fd N)
 *            [--port N] [--client CIDR] [--parent PID] [--allow host:port]...
 *            [--allow-net CIDR]... [--max-conns N] [--hello-timeout-ms N]
 *
 * --listen-fd: serve a socket the parent bound and listened on already (the Kubernetes
 * backend, which must know the port before the pod exists). --client: serve only clients in
 * CIDR (the box pod's IP; --listen-net implies its own network). --parent: exit as soon as the
 * process PID is no longer this program's parent (the replica died).
 */
#include "sandbox/egress_policy.h"
#include "common/clock.h"
#include "common/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define HEAD_CAP	   (16 * 1024)	     /* request line + headers */
#define BODY_CAP	   (8 * 1024 * 1024) /* plain-HTTP request body */
#define HEAD_TIMEOUT_S	   30
#define HELLO_TIMEOUT_MS   10000 /* for the TLS ClientHello after "200 Connection established" */
#define CONNECT_TIMEOUT_MS 10000
#define IDLE_TIMEOUT_MS	   (300 * 1000)
#define MAX_RULES	   256
#define MAX_NETS	   64
#define LOCK_POLL_MS	   500

static egp_rule rules[MAX_RULES];
static size_t n_rules;
static egp_net nets[MAX_NETS];
static size_t n_nets;
static int max_conns = 128;
static int hello_timeout_ms = HELLO_TIMEOUT_MS;
static egp_net client_net; /* --listen-net: only clients on the job's network are served */
static bool have_client_net;
static atomic_int active_conns;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
/* SIGUSR1 (sent by the host when a job's setup phase ends) locks the proxy for good: every
 * later request is refused and open tunnels are closed within LOCK_POLL_MS. There is no way
 * back: the agent phase that follows has no network. */
static volatile sig_atomic_t locked;

struct conn {
	int fd;
	char client[INET6_ADDRSTRLEN];
};

/* Append s as a JSON string body (without quotes), escaping everything outside printable
 * ASCII; stops at cap. Outside data reaches the log only through here. */
static size_t json_put(char *out, size_t pos, size_t cap, const char *s, size_t max_in)
{
	for (size_t i = 0; s && s[i] && i < max_in && pos + 7 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			out[pos++] = '\\';
			out[pos++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			pos += (size_t)snprintf(out + pos, cap - pos, "\\u%04x", c);
		} else {
			out[pos++] = (char)c;
		}
	}
	return pos;
}

/* One JSON line on stderr per decision; sandbox/egress.c relays them to autopatch's log. */
static void log_event(const char *level, const char *msg, const char *client, const char *method,
		      const char *target, const char *detail_key, const char *detail)
{
	char line[2048], ts[40];
	struct timeval tv;
	struct tm tm;
	size_t pos = 0;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	pos += (size_t)snprintf(line, sizeof(line),
				"{\"time\":\"%s.%03dZ\",\"level\":\"%s\","
				"\"msg\":\"%s\"",
				ts, (int)(tv.tv_usec / 1000), level, msg);
	const char *keys[] = {"client", "method", "target", detail_key};
	const char *vals[] = {client, method, target, detail};
	for (size_t i = 0; i < 4; i++) {
		if (!keys[i] || !vals[i])
			continue;
		pos += (size_t)snprintf(line + pos, sizeof(line) - pos, ",\"%s\":\"", keys[i]);
		pos = json_put(line, pos, sizeof(line) - 4, vals[i], 512);
		line[pos++] = '"';
	}
	line[pos++] = '}';
	line[pos++] = '\n';
	pthread_mutex_lock(&log_lock);
	if (write(2, line, pos) < 0) {
		/* nowhere left to report it */
	}
	pthread_mutex_unlock(&log_lock);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void reply(int fd, int status, const char *phrase, const char *reason)
{
	char msg[1024];
	int n;

	n = snprintf(
	    msg, sizeof(msg),
	    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
	    "X-Autopatch-Egress: denied\r\nContent-Length: %zu\r\n\r\nautopatch egress: %s\n",
	    status, phrase, strlen("autopatch egress: \n") + strlen(reason), reason);
	if (n > 0)
		write_all(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/* Refuse a request: 403 (policy) or 400 (malformed), and a "egress denied" log line. */
static void deny(struct conn *c, int status, const char *method, const char *target,
		 const char *reason)
{
	reply(c->fd, status,
	      status == 403   ? "Forbidden"
	      : status == 503 ? "Service Unavailable"
			      : "Bad Request",
	      reason);
	log_event("warn", "egress denied", c->client, method, target, "reason", reason);
}

/* Read the request head (up to and including the blank line) into buf. Returns the head's
 * length, with any extra bytes after it counted in *extra; -1 on error, timeout or overflow. */
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *extra)
{
	size_t len = 0;

	while (len < cap) {
		ssize_t r = recv(fd, buf + len, cap - len, 0);
		char *end;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		len += (size_t)r;
		end = memmem(buf, len, "\r\n\r\n", 4);
		if (end) {
			size_t head = (size_t)(end - buf) + 4;

			*extra = len - head;
			return (ssize_t)head;
		}
	}
	return -1;
}

/* Connect to addr within CONNECT_TIMEOUT_MS. Returns the socket or -1. */
static int connect_timeout(const struct sockaddr *sa, socklen_t len)
{
	int fd, flags, err = 0;
	socklen_t elen = sizeof(err);
	struct pollfd p;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS)
			goto fail;
		p.fd = fd;
		p.events = POLLOUT;
		if (poll(&p, 1, CONNECT_TIMEOUT_MS) != 1)
			goto fail;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err != 0)
			goto fail;
	}
	fcntl(fd, F_SETFL, flags);
	return fd;
fail:
	close(fd);
	return -1;
}

/* Resolve host here (the sandbox has no DNS), refuse the name if any address is not allowed
 * (a name that mixes public and private answers is treated as hostile), then connect to the
 * checked addresses in order. Returns the upstream socket, or -1 after replying and logging. */
static int open_upstream(struct conn *c, const egp_target *t, const char *target)
{
	struct addrinfo hints = {0}, *res = NULL, *ai;
	char port[8], addr[INET6_ADDRSTRLEN + 16], why[256];
	enum egp_class cls;
	int fd = -1, rc;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	snprintf(port, sizeof(port), "%u", t->port);
	rc = getaddrinfo(t->host, port, &hints, &res);
	if (rc != 0) {
		reply(c->fd, 502, "Bad Gateway", "cannot resolve the host name");
		log_event("error", "egress failed", c->client, t->method, target, "reason",
			  gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		const void *a =
		    ai->ai_family == AF_INET
			? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
			: (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;

		if (egp_addr_allowed(ai->ai_addr, nets, n_nets, &cls) == 0)
			continue;
		inet_ntop(ai->ai_family, a, addr, sizeof(addr));
		snprintf(why, sizeof(why), "the name resolves to a %s address (%s)",
			 egp_class_name(cls), addr);
		deny(c, 403, t->method, target, why);
		goto out;
	}
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		fd = connect_timeout(ai->ai_addr, ai->ai_addrlen);
	if (fd < 0) {
		reply(c->fd, 502, "Bad Gateway", "cannot connect to the host");
		log_event("error", "egress failed", c->client, t->method, target, "reason",
			  "connect failed");
	}
out:
	freeaddrinfo(res);
	return fd;
}

/* Copy bytes both ways until both directions closed or nothing moved for IDLE_TIMEOUT_MS.
 * When client_in is false the client's further bytes are not forwarded (plain HTTP: one
 * request per connection). */
static void relay(int cfd, int ufd, bool client_in)
{
	char buf[16384];
	bool c_open = client_in, u_open = true;
	int idle_ms = 0;

	while (u_open) {
		struct pollfd p[2] = {{ufd, POLLIN, 0}, {cfd, c_open ? POLLIN : 0, 0}};
		int n = poll(p, 2, LOCK_POLL_MS);

		if (locked)
			return;
		if (n == 0 && (idle_ms += LOCK_POLL_MS) < IDLE_TIMEOUT_MS)
			continue;
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return;
		}
		idle_ms = 0;
		if (p[0].revents) {
			ssize_t r = recv(ufd, buf, sizeof(buf), 0);

			if (r <= 0) {
				u_open = false;
				shutdown(cfd, SHUT_WR);
			} else if (write_all(cfd, buf, (size_t)r) < 0) {
				return;
			}
		}
		if (c_open && p[1].revents) {
			ssize_t r = recv(cfd, buf, sizeof(buf), 0);

			if (r <= 0) {
				c_open = false;
				shutdown(ufd, SHUT_WR);
			} else if (write_all(ufd, buf, (size_t)r) < 0) {
				return;
			}
		}
	}
}

static bool header_is(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

/* Forward one plain-HTTP request: origin-form request line, Host set to the checked name,
 * hop-by-hop headers dropped, "Connection: close", then the body (Content-Length only). */
static void forward_http(struct conn *c, const egp_target *t, const char *target, char *head,
			 size_t head_len, size_t extra)
{
	static const char *hop[] = {"host",
				    "connection",
				    "proxy-connection",
				    "keep-alive",
				    "proxy-authorization",
				    "proxy-authenticate",
				    "te",
				    "trailer",
				    "upgrade"};
	char *out = NULL, *line, *eol;
	size_t cap = head_len + 512, pos = 0, body_len = 0, have;
	const char *path = head + t->path_off;
	int ufd = -1;

	const char *end_head = head + head_len - 2; /* the blank line's CRLF */
	bool have_len = false;

	if (memchr(head, '\0', head_len)) {
		deny(c, 400, t->method, target, "NUL byte in the request head");
		return;
	}
	for (line = strstr(head, "\r\n") + 2; line < end_head; line = eol + 2) {
		size_t len;

		eol = strstr(line, "\r\n");
		len = (size_t)(eol - line);
		if (len == 0 || line[0] == ' ' || line[0] == '\t' || !memchr(line, ':', len)) {
			deny(c, 400, t->method, target, "malformed request header");
			return;
		}
		if (header_is(line, len, "transfer-encoding")) {
			deny(c, 400, t->method, target, "chunked request bodies are not supported");
			return;
		}
		if (header_is(line, len, "content-length")) {
			char *end;
			unsigned long long v = strtoull(line + 15, &end, 10);

			if (have_len || end == line + 15 || v > BODY_CAP ||
			    strspn(line + 15, " \t0123456789") != len - 15) {
				deny(c, 400, t->method, target,
				     "bad, repeated or too large Content-Length");
				return;
			}
			body_len = (size_t)v;
			have_len = true;
		}
	}
	ufd = open_upstream(c, t, target);
	if (ufd < 0)
		return;
	out = malloc(cap);
	if (!out)
		goto out_close;
	pos += (size_t)snprintf(out, cap, "%s %s%.*s HTTP/1.1\r\nHost: %s", t->method,
				(t->path_len == 0 || path[0] != '/') ? "/" : "", (int)t->path_len,
				path, t->host);
	if (t->port != 80)
		pos += (size_t)snprintf(out + pos, cap - pos, ":%u", t->port);
	pos += (size_t)snprintf(out + pos, cap - pos, "\r\n");
	for (line = strstr(head, "\r\n") + 2; line < end_head; line = eol + 2) {
		size_t len;
		bool drop = false;

		eol = strstr(line, "\r\n");
		len = (size_t)(eol - line);
		for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
			drop = drop || header_is(line, len, hop[i]);
		if (drop || pos + len + 2 >= cap)
			continue;
		memcpy(out + pos, line, len + 2);
		pos += len + 2;
	}
	pos += (size_t)snprintf(out + pos, cap - pos, "Connection: close\r\n\r\n");
	log_event("info", "egress allowed", c->client, t->method, target, NULL, NULL);
	if (write_all(ufd, out, pos) < 0)
		goto out_free;
	have = extra < body_len ? extra : body_len;
	if (write_all(ufd, head + head_len, have) < 0)
		goto out_free;
	while (have < body_len) {
		char buf[16384];
		size_t want = body_len - have < sizeof(buf) ? body_len - have : sizeof(buf);
		ssize_t r = recv(c->fd, buf, want, 0);

		if (r <= 0 || write_all(ufd, buf, (size_t)r) < 0)
			goto out_free;
		have += (size_t)r;
	}
	relay(c->fd, ufd, false);
out_free:
	free(out);
out_close:
	close(ufd);
}

/* Read the client's first bytes in a tunnel (buf[0..len) already arrived with the CONNECT
 * head) until they hold a whole TLS ClientHello, at most EGP_HELLO_MAX bytes within
 * --hello-timeout-ms (10 s), and check its server name against the CONNECT host. Returns how many
 * bytes buf holds (all to be forwarded unchanged), or -1 after logging the denial (the
 * tunnel is then closed: the client already has its 200, so no HTTP answer is possible). */
static ssize_t check_client_hello(struct conn *c, const egp_target *t, const char *target,
				  uint8_t *buf, size_t len)
{
	long long deadline;
	char sni[EGP_HOST_MAX + 1], why[EGP_HOST_MAX + 128];
	enum egp_sni_status st = egp_sni_from_client_hello(buf, len, sni, sizeof(sni));

	deadline = ap_mono_ms() + hello_timeout_ms;
	while (st == EGP_SNI_NEED_MORE && len < EGP_HELLO_MAX) {
		struct pollfd p = {c->fd, POLLIN, 0};
		long long left;
		ssize_t r;

		left = deadline - ap_mono_ms();
		if (left <= 0)
			break;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		r = recv(c->fd, buf + len, EGP_HELLO_MAX - len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		st = egp_sni_from_client_hello(buf, len, sni, sizeof(sni));
	}
	if (st == EGP_SNI_OK && egp_sni_matches(sni, t->host))
		return (ssize_t)len;
	if (st == EGP_SNI_OK)
		snprintf(why, sizeof(why),
			 "the TLS server name (SNI) %s is not the CONNECT host (domain fronting)",
			 sni);
	else if (st == EGP_SNI_NEED_MORE && len == EGP_HELLO_MAX)
		snprintf(why, sizeof(why), "%s", egp_sni_status_reason(EGP_SNI_TOO_BIG));
	else if (st == EGP_SNI_NEED_MORE)
		snprintf(why, sizeof(why), "no complete TLS ClientHello within %d ms",
			 hello_timeout_ms);
	else
		snprintf(why, sizeof(why), "%s", egp_sni_status_reason(st));
	log_event("warn", "egress denied", c->client, t->method, target, "reason", why);
	return -1;
}

static void *serve(void *arg)
{
	struct conn *c = arg;
	struct timeval tv = {HEAD_TIMEOUT_S, 0};
	char *head = NULL, target[300] = "", *eol;
	uint8_t *hello = NULL;
	ssize_t head_len, hello_len = -1;
	size_t extra = 0;
	egp_target t;
	const char *reason;
	int rc, ufd;

	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	head = malloc(HEAD_CAP + 1);
	if (!head)
		goto out;
	head_len = read_head(c->fd, head, HEAD_CAP, &extra);
	if (head_len < 0) {
		deny(c, 400, NULL, NULL, "no complete request head within 16 KiB and 30 s");
		goto out;
	}
	head[head_len + (ssize_t)extra] = '\0';
	eol = memmem(head, (size_t)head_len, "\r\n", 2);
	{
		const char *sp = memchr(head, ' ', (size_t)(eol - head));
		const char *sp2 = sp ? memchr(sp + 1, ' ', (size_t)(eol - sp - 1)) : NULL;

		if (sp && sp2)
			snprintf(target, sizeof(target), "%.*s", (int)(sp2 - sp - 1), sp + 1);
	}
	rc = egp_parse_request_line(&t, head, (size_t)(eol - head), &reason);
	if (rc < 0) {
		deny(c, rc == AP_EDENIED ? 403 : 400, t.method[0] ? t.method : NULL, target,
		     reason);
		goto out;
	}
	if (locked) {
		deny(c, 403, t.method, target,
		     "the setup phase is over: the agent phase has no network");
		goto out;
	}
	if (!egp_allowed(rules, n_rules, t.host, t.port)) {
		deny(c, 403, t.method, target, "host:port is not on the egress allow-list");
		goto out;
	}
	if (!t.connect) {
		forward_http(c, &t, target, head, (size_t)head_len, extra);
		goto out;
	}
	/* A tunnel carries TLS to the CONNECT host, on every port: its ClientHello must name
	 * that host (no domain fronting, no other protocol), checked before one byte of it goes
	 * upstream. Bytes sent early, with the CONNECT head, count as the hello's start. */
	if (extra > EGP_HELLO_MAX) {
		deny(c, 400, t.method, target, "too many bytes sent before the tunnel opened");
		goto out;
	}
	ufd = open_upstream(c, &t, target);
	if (ufd < 0)
		goto out;
	tv.tv_sec = 0;
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (write_all(c->fd, "HTTP/1.1 200 Connection established\r\n\r\n", 39) == 0) {
		hello = malloc(EGP_HELLO_MAX);
		if (hello) {
			memcpy(hello, head + head_len, extra);
			hello_len = check_client_hello(c, &t, target, hello, extra);
		}
	}
	if (hello_len >= 0) {
		log_event("info", "egress allowed", c->client, t.method, target, NULL, NULL);
		if (write_all(ufd, (const char *)hello, (size_t)hello_len) == 0)
			relay(c->fd, ufd, true);
	}
	close(ufd);
out:
	free(hello);
	free(head);
	close(c->fd);
	free(c);
	atomic_fetch_sub(&active_conns, 1);
	return NULL;
}

/* The address of this container on the network cidr (the job's Internal network), so the
 * proxy is not offered on its other, outer network. */
static int find_listen_addr(const char *cidr, struct sockaddr_storage *out, socklen_t *len)
{
	struct ifaddrs *ifs, *i;
	egp_net net;
	int rc = -1;

	if (egp_net_parse(&net, cidr) < 0 || getifaddrs(&ifs) < 0)
		return -1;
	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != net.family ||
		    !egp_net_contains(&net, i->ifa_addr))
			continue;
		*len = net.family == AF_INET ? sizeof(struct sockaddr_in)
					     : sizeof(struct sockaddr_in6);
		memcpy(out, i->ifa_addr, *len);
		rc = 0;
		break;
	}
	freeifaddrs(ifs);
	return rc;
}

static int parse_listen(const char *s, struct sockaddr_storage *out, socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)out;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, s, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		*len = sizeof(*s6);
		return 0;
	}
	return -1;
}

static pid_t parent; /* --parent: exit when it is no longer ours */

/* Poll the parent once a second: the replica that started this proxy died (a crashed
 * replica must not leave a proxy listening). */
static void *watch_parent(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {1, 0};

		nanosleep(&ts, NULL);
		if (getppid() != parent)
			_exit(0);
	}
	return NULL;
}

static void on_lock(int sig)
{
	(void)sig;
	locked = 1;
}

static int usage(const char *msg)
{
	fprintf(stderr,
		"autopatch-egress-proxy: %s\nusage: autopatch-egress-proxy (--listen-net "
		"CIDR | --listen ADDR | --listen-fd N) [--port N] [--client CIDR] [--parent "
		"PID] [--allow host:port]... [--allow-net CIDR]... [--max-conns N] "
		"[--hello-timeout-ms N]\n",
		msg);
	return 2;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t slen = 0;
	const char *listen_net = NULL, *listen_addr = NULL;
	int listen_fd = -1;
	long port = 3128;
	char shown[INET6_ADDRSTRLEN + 8];
	int lfd, one = 1;
	bool announced = false;
	pthread_attr_t attr;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			return usage("missing value");
		i++;
		if (strcmp(a, "--listen-net") == 0) {
			listen_net = v;
		} else if (strcmp(a, "--listen-fd") == 0) {
			listen_fd = (int)strtol(v, NULL, 10);
		} else if (strcmp(a, "--client") == 0) {
			if (egp_net_parse(&client_net, v) < 0)
				return usage("bad --client");
			have_client_net = true;
		} else if (strcmp(a, "--parent") == 0) {
			parent = (pid_t)strtol(v, NULL, 10);
		} else if (strcmp(a, "--listen") == 0) {
			listen_addr = v;
		} else if (strcmp(a, "--port") == 0) {
			port = strtol(v, NULL, 10);
		} else if (strcmp(a, "--max-conns") == 0) {
			max_conns = atoi(v);
		} else if (strcmp(a, "--hello-timeout-ms") == 0) {
			hello_timeout_ms = atoi(v);
		} else if (strcmp(a, "--allow") == 0) {
			if (n_rules == MAX_RULES || egp_rule_parse(&rules[n_rules++], v) < 0)
				return usage(ap_error_last()[0] ? ap_error_last()
								: "too many rules");
		} else if (strcmp(a, "--allow-net") == 0) {
			if (n_nets == MAX_NETS || egp_net_parse(&nets[n_nets++], v) < 0)
				return usage(ap_error_last()[0] ? ap_error_last()
								: "too many nets");
		} else {
			return usage("unknown option");
		}
	}
	if (port < 0 || port > 65535 || max_conns < 1 || hello_timeout_ms < 1 ||
	    hello_timeout_ms > 600000)
		return usage("bad --port, --max-conns or --hello-timeout-ms");
	if (listen_net && !have_client_net && egp_net_parse(&client_net, listen_net) == 0)
		have_client_net = true;
	if (listen_fd < 0 &&
	    (listen_net ? find_listen_addr(listen_net, &ss, &slen) < 0
			: !listen_addr || parse_listen(listen_addr, &ss, &slen) < 0))
		return usage("no address to listen on (--listen-net matched no interface?)");
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);

	signal(SIGPIPE, SIG_IGN);
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_lock; /* no SA_RESTART: accept() returns to announce it */
		sigaction(SIGUSR1, &sa, NULL);
	}
	if (parent > 0) {
		pthread_t watcher;

		if (getppid() != parent ||
		    pthread_create(&watcher, NULL, watch_parent, NULL) != 0) {
			fprintf(stderr, "autopatch-egress-proxy: the parent %ld is gone\n",
				(long)parent);
			return 1;
		}
		pthread_detach(watcher);
	}
	if (listen_fd >= 0) {
		lfd = listen_fd;
		slen = sizeof(ss);
		if (getsockname(lfd, (struct sockaddr *)&ss, &slen) < 0 ||
		    fcntl(lfd, F_SETFD, FD_CLOEXEC) < 0) {
			fprintf(stderr, "autopatch-egress-proxy: --listen-fd %d: %s\n", lfd,
				strerror(errno));
			return 1;
		}
	} else {
		lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	if (lfd < 0 || (listen_fd < 0 &&
			(setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
			 bind(lfd, (struct sockaddr *)&ss, slen) < 0 || listen(lfd, 128) < 0 ||
			 getsockname(lfd, (struct sockaddr *)&ss, &slen) < 0))) {
		fprintf(stderr, "autopatch-egress-proxy: cannot listen: %s\n", strerror(errno));
		return 1;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, shown, sizeof(shown));
		snprintf(shown + strlen(shown), 8, ":%u", ntohs(s4->sin_port));
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		shown[0] = '[';
		inet_ntop(AF_INET6, &s6->sin6_addr, shown + 1, sizeof(shown) - 1);
		snprintf(shown + strlen(shown), 9, "]:%u", ntohs(s6->sin6_port));
	}
	log_event("info", "egress proxy listening", NULL, NULL, NULL, "addr", shown);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct conn *c;
		pthread_t th;
		int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);

		if (locked && !announced) {
			announced = true;
			log_event("info", "egress locked", NULL, NULL, NULL, NULL, NULL);
		}
		if (fd < 0)
			continue;
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		if (peer.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, c->client,
				  sizeof(c->client));
		else
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, c->client,
				  sizeof(c->client));
		/* Defence in depth: whatever routes a packet to the listening address, serve
		 * only clients on the job's network. */
		if (have_client_net && !egp_net_contains(&client_net, (struct sockaddr *)&peer)) {
			deny(c, 403, NULL, NULL, "the client is not on the job's network");
			close(fd);
			free(c);
			continue;
		}
		if (atomic_fetch_add(&active_conns, 1) >= max_conns) {
			deny(c, 503, NULL, NULL, "too many concurrent connections");
			close(fd);
			free(c);
			atomic_fetch_sub(&active_conns, 1);
			continue;
		}
		/* Only the main thread takes SIGUSR1, so its accept() wakes up to log the lock. */
		sigset_t usr1, prev;

		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &usr1, &prev);
		int started = pthread_create(&th, &attr, serve, c);

		pthread_sigmask(SIG_SETMASK, &prev, NULL);
		if (started != 0) {
			close(fd);
			free(c);
			atomic_fetch_sub(&active_conns, 1);
		}
	}
}
