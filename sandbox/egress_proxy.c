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
 *            [--allow-net CIDR]... [--max-conns N] [--queue-ms N] [--hello-timeout-ms N]
 *
 * Limits (docs/egress.md, "Limits"): at most --max-conns connections are served at once (one
 * thread each); a connection beyond that waits in the listening socket's queue (backlog
 * LISTEN_BACKLOG) until one ends, and is refused with 503 only when no slot freed for
 * --queue-ms. Names are resolved once per DNS_TTL_MS and shared by concurrent requests (a
 * package manager asks for the same registry hundreds of times at once), and a temporary
 * resolver failure is retried. Every decision's JSON line carries a "kind" (denied, locked,
 * limit, dns, reserved, never, connect, tls, malformed, client) that the host's report groups
 * by.
 *
 * --listen-fd: serve a socket the parent bound and listened on already (the Kubernetes
 * backend, which must know the port before the pod exists). --client: serve only clients in
 * CIDR (the box pod's IP; --listen-net implies its own network). --parent: exit as soon as the
 * process PID is no longer this program's parent (the replica died).
 */
#include "common/clock.h"
#include "common/err.h"
#include "sandbox/egress_policy.h"

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
#define HALF_IDLE_MS	   (30 * 1000) /* a tunnel one side of which has closed */
#define LISTEN_BACKLOG	   1024	       /* connections queued while all slots are busy */
#define DNS_SLOTS	   64
#define DNS_MAX_ADDRS	   16
#define DNS_TTL_MS	   (60 * 1000)
#define DNS_NEG_TTL_MS	   2000
#define DNS_TRIES	   3

static egp_rule rules[MAX_RULES];
static size_t n_rules;
static egp_net nets[MAX_NETS];
static size_t n_nets;
static int max_conns = 256;
static int queue_ms = 60 * 1000;
static int hello_timeout_ms = HELLO_TIMEOUT_MS;
static egp_net client_net; /* --listen-net: only clients on the job's network are served */
static bool have_client_net;
static int active_conns; /* under slot_lock */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slot_freed = PTHREAD_COND_INITIALIZER;
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

/* Bytes log_event() keeps free after a value: a key, its quotes and the line's end. */
#define LOG_KEY_ROOM 32

/* One JSON line on stderr per decision; sandbox/egress.c relays them to autopatch's log. */
static void log_event(const char *level, const char *msg, const char *kind, const char *client,
		      const char *method, const char *target, const char *detail_key,
		      const char *detail)
{
	char line[2048], ts[40];
	struct timeval tv;
	struct tm tm;
	size_t pos = 0;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	/* level, msg and the keys are this file's own words (under LOG_KEY_ROOM bytes); the
	 * values, outside data, go through json_put(), which stops LOG_KEY_ROOM short of the end,
	 * so every snprintf here fits and the closing '"', '}' and '\n' always have room. */
	pos += (size_t)snprintf(line, sizeof(line),
				"{\"time\":\"%s.%03dZ\",\"level\":\"%s\","
				"\"msg\":\"%s\"",
				ts, (int)(tv.tv_usec / 1000), level, msg);
	const char *keys[] = {"kind", "client", "method", "target", detail_key};
	const char *vals[] = {kind, client, method, target, detail};
	for (size_t i = 0; i < 5; i++) {
		if (!keys[i] || !vals[i])
			continue;
		if (pos + LOG_KEY_ROOM > sizeof(line))
			break;
		pos += (size_t)snprintf(line + pos, sizeof(line) - pos, ",\"%s\":\"", keys[i]);
		pos = json_put(line, pos, sizeof(line) - LOG_KEY_ROOM, vals[i], 512);
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

	/* reason is one of the why buffers here (at most EGP_HOST_MAX + 128 bytes): fits. */
	n = snprintf(
	    msg, sizeof(msg),
	    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
	    "X-Autopatch-Egress: denied\r\nContent-Length: %zu\r\n\r\nautopatch egress: %s\n",
	    status, phrase, strlen("autopatch egress: \n") + strlen(reason), reason);
	if (n > 0)
		write_all(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/* Refuse a request: 403 (policy), 400 (malformed), 502 (name or connection failed) or 503
 * (limit), and an "egress denied" log line of that kind. */
static void deny(struct conn *c, int status, const char *kind, const char *method,
		 const char *target, const char *reason)
{
	reply(c->fd, status,
	      status == 403   ? "Forbidden"
	      : status == 503 ? "Service Unavailable"
	      : status == 502 ? "Bad Gateway"
			      : "Bad Request",
	      reason);
	log_event("warn", "egress denied", kind, c->client, method, target, "reason", reason);
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

/* Resolved names, shared by every connection: a package manager opens dozens of tunnels to
 * the same registry at once, and one lookup each overloaded the resolver (66 failures in one
 * npm install). An entry holds the addresses of one name for DNS_TTL_MS (a failure for
 * DNS_NEG_TTL_MS); while one thread resolves a name, the others asking for it wait for its
 * answer. The addresses are checked against the policy on every use, so a cached answer is
 * judged exactly like a fresh one. */
struct dns_entry {
	char host[EGP_HOST_MAX + 1];
	struct sockaddr_storage addrs[DNS_MAX_ADDRS];
	socklen_t lens[DNS_MAX_ADDRS];
	int n;		   /* addresses; 0 with err set: the lookup failed */
	int err;	   /* getaddrinfo's error of a failed lookup */
	long long expires; /* monotonic ms */
	bool busy;	   /* a thread is resolving it now */
};

static struct dns_entry dns_cache[DNS_SLOTS];
static pthread_mutex_t dns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dns_done = PTHREAD_COND_INITIALIZER;

/* The entry for host (dns_lock held): the existing one, else a free or the oldest idle slot
 * (NULL when every slot is being resolved). */
static struct dns_entry *dns_slot(const char *host)
{
	struct dns_entry *pick = NULL;

	for (size_t i = 0; i < DNS_SLOTS; i++)
		if (dns_cache[i].host[0] && strcasecmp(dns_cache[i].host, host) == 0)
			return &dns_cache[i];
	for (size_t i = 0; i < DNS_SLOTS; i++) {
		struct dns_entry *d = &dns_cache[i];

		if (!d->busy && (!pick || !d->host[0] || d->expires < pick->expires))
			pick = d;
		if (pick && !pick->host[0])
			break;
	}
	if (pick) {
		memset(pick, 0, sizeof(*pick));
		snprintf(pick->host, sizeof(pick->host), "%s", host);
	}
	return pick;
}

/* getaddrinfo, retried on a temporary failure (EAI_AGAIN: the resolver timed out or was
 * overloaded), into d (dns_lock not held). */
static void dns_lookup(struct dns_entry *d, const char *host)
{
	struct addrinfo hints = {0}, *res = NULL;
	int rc = EAI_AGAIN;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	for (int i = 0; i < DNS_TRIES && rc == EAI_AGAIN; i++) {
		struct timespec ts = {0, 250L * 1000 * 1000 * i};

		if (i)
			nanosleep(&ts, NULL);
		rc = getaddrinfo(host, NULL, &hints, &res);
	}
	d->n = 0;
	d->err = rc;
	for (struct addrinfo *ai = res; rc == 0 && ai && d->n < DNS_MAX_ADDRS; ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof(d->addrs[0]))
			continue;
		memcpy(&d->addrs[d->n], ai->ai_addr, ai->ai_addrlen);
		d->lens[d->n++] = ai->ai_addrlen;
	}
	if (rc == 0 && d->n == 0)
		d->err = EAI_NONAME;
	if (res)
		freeaddrinfo(res);
}

/* The addresses of host (at most DNS_MAX_ADDRS, into addrs/lens), from the cache or a lookup.
 * Returns how many, or 0 with *err set to getaddrinfo's error. */
static int dns_resolve(const char *host, struct sockaddr_storage *addrs, socklen_t *lens, int *err)
{
	struct dns_entry *d;
	int n;

	pthread_mutex_lock(&dns_lock);
	for (;;) {
		d = dns_slot(host);
		if (d && !d->busy && (d->n > 0 || d->err) && ap_mono_ms() < d->expires)
			break; /* a fresh answer */
		if (d && !d->busy) {
			d->busy = true;
			pthread_mutex_unlock(&dns_lock);
			dns_lookup(d, host);
			pthread_mutex_lock(&dns_lock);
			d->expires = ap_mono_ms() + (d->n ? DNS_TTL_MS : DNS_NEG_TTL_MS);
			d->busy = false;
			pthread_cond_broadcast(&dns_done);
			break;
		}
		pthread_cond_wait(&dns_done, &dns_lock); /* someone resolves it (or every slot) */
	}
	n = d->n;
	*err = d->err;
	memcpy(addrs, d->addrs, sizeof(d->addrs[0]) * (size_t)n);
	memcpy(lens, d->lens, sizeof(d->lens[0]) * (size_t)n);
	pthread_mutex_unlock(&dns_lock);
	return n;
}

/* Resolve host here (the sandbox has no DNS), refuse the name if any address is not allowed
 * (a name that mixes public and private answers is treated as hostile), then connect to the
 * checked addresses in order. Returns the upstream socket, or -1 after replying and logging:
 * kind "dns" (the name did not resolve), "reserved" (an address only AUTOPATCH_EGRESS_ALLOW_NETS
 * could open), "never" (loopback, link-local, ...), "connect" (no address answered). */
static int open_upstream(struct conn *c, const egp_target *t, const char *target)
{
	struct sockaddr_storage addrs[DNS_MAX_ADDRS];
	socklen_t lens[DNS_MAX_ADDRS];
	char addr[INET6_ADDRSTRLEN + 16], why[EGP_HOST_MAX + 128];
	enum egp_class cls;
	int fd = -1, n, err = 0;

	n = dns_resolve(t->host, addrs, lens, &err);
	if (n == 0) {
		snprintf(why, sizeof(why), "cannot resolve %s: %s", t->host, gai_strerror(err));
		deny(c, 502, "dns", t->method, target, why);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct sockaddr *sa = (struct sockaddr *)&addrs[i];
		const void *a = sa->sa_family == AF_INET
				    ? (const void *)&((struct sockaddr_in *)sa)->sin_addr
				    : (const void *)&((struct sockaddr_in6 *)sa)->sin6_addr;

		if (egp_addr_allowed(sa, nets, n_nets, &cls) == 0)
			continue;
		inet_ntop(sa->sa_family, a, addr, sizeof(addr));
		snprintf(why, sizeof(why), "the name resolves to a %s address (%s)",
			 egp_class_name(cls), addr);
		deny(c, 403, egp_class_openable(cls) ? "reserved" : "never", t->method, target,
		     why);
		return -1;
	}
	for (int i = 0; i < n && fd < 0; i++) {
		struct sockaddr *sa = (struct sockaddr *)&addrs[i];

		if (sa->sa_family == AF_INET)
			((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)t->port);
		else
			((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)t->port);
		fd = connect_timeout(sa, lens[i]);
	}
	if (fd < 0)
		deny(c, 502, "connect", t->method, target, "cannot connect to the host");
	return fd;
}

/* Copy bytes both ways until both directions closed or nothing moved for IDLE_TIMEOUT_MS
 * (HALF_IDLE_MS once the client closed its side of a tunnel: a server that never closes its
 * side would otherwise hold a connection slot for minutes). When client_in is false the
 * client's further bytes are not forwarded (plain HTTP: one request per connection). */
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
		if (n == 0 && (idle_ms += LOCK_POLL_MS) <
				  (client_in && !c_open ? HALF_IDLE_MS : IDLE_TIMEOUT_MS))
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

/* Whether the header lines of a plain-HTTP request head (head_len bytes, its blank line
 * included) are well formed, without a chunked body and with at most one Content-Length
 * under BODY_CAP (into *body_len); a request that is not is denied with 400. */
static bool request_headers_ok(struct conn *c, const egp_target *t, const char *target,
			       const char *head, size_t head_len, size_t *body_len)
{
	const char *end_head = head + head_len - 2; /* the blank line's CRLF */
	const char *line, *eol;
	bool have_len = false;

	if (memchr(head, '\0', head_len)) {
		deny(c, 400, "malformed", t->method, target, "NUL byte in the request head");
		return false;
	}
	for (line = strstr(head, "\r\n") + 2; line < end_head; line = eol + 2) {
		size_t len;

		eol = strstr(line, "\r\n");
		len = (size_t)(eol - line);
		if (len == 0 || line[0] == ' ' || line[0] == '\t' || !memchr(line, ':', len)) {
			deny(c, 400, "malformed", t->method, target, "malformed request header");
			return false;
		}
		if (header_is(line, len, "transfer-encoding")) {
			deny(c, 400, "malformed", t->method, target,
			     "chunked request bodies are not supported");
			return false;
		}
		if (header_is(line, len, "content-length")) {
			char *end;
			unsigned long long v = strtoull(line + 15, &end, 10);

			if (have_len || end == line + 15 || v > BODY_CAP ||
			    strspn(line + 15, " \t0123456789") != len - 15) {
				deny(c, 400, "malformed", t->method, target,
				     "bad, repeated or too large Content-Length");
				return false;
			}
			*body_len = (size_t)v;
			have_len = true;
		}
	}
	return true;
}

/* Send the request body of body_len bytes to ufd: the extra bytes that came with the head
 * (at body), then the rest from the client. -1 when either side fails. */
static int forward_body(struct conn *c, int ufd, const char *body, size_t extra, size_t body_len)
{
	size_t have = extra < body_len ? extra : body_len;

	if (write_all(ufd, body, have) < 0)
		return -1;
	while (have < body_len) {
		char buf[16384];
		size_t want = body_len - have < sizeof(buf) ? body_len - have : sizeof(buf);
		ssize_t r = recv(c->fd, buf, want, 0);

		if (r <= 0 || write_all(ufd, buf, (size_t)r) < 0)
			return -1;
		have += (size_t)r;
	}
	return 0;
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
	size_t cap = head_len + 512, pos = 0, body_len = 0;
	const char *path = head + t->path_off;
	int ufd = -1;

	const char *end_head = head + head_len - 2; /* the blank line's CRLF */

	if (!request_headers_ok(c, t, target, head, head_len, &body_len))
		return;
	ufd = open_upstream(c, t, target);
	if (ufd < 0)
		return;
	out = malloc(cap);
	if (!out)
		goto out_close;
	/* The request line and Host come from the head's own first line (method, path, host
	 * and port), plus "/", "Host: " and "Connection: close": under the 512 bytes cap keeps
	 * above head_len, so these snprintf calls fit; headers are copied only while they do. */
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
	log_event("info", "egress allowed", NULL, c->client, t->method, target, NULL, NULL);
	if (write_all(ufd, out, pos) < 0)
		goto out_free;
	if (forward_body(c, ufd, head + head_len, extra, body_len) < 0)
		goto out_free;
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
	bool closed = false;

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
		if (r <= 0) {
			closed = r == 0;
			break;
		}
		len += (size_t)r;
		st = egp_sni_from_client_hello(buf, len, sni, sizeof(sni));
	}
	/* A client that sends nothing through a tunnel (an HTTP agent that gives up on a socket
	 * it no longer needs, or leaves it open: npm 9 did so 60-150 times in one install) was
	 * refused nothing: the tunnel is closed, logged, and not reported as a refusal. */
	if (len == 0 && st == EGP_SNI_NEED_MORE) {
		if (closed)
			snprintf(why, sizeof(why),
				 "the client closed the tunnel before its TLS ClientHello");
		else
			snprintf(why, sizeof(why),
				 "no byte within %d ms after the tunnel opened: closed",
				 hello_timeout_ms);
		log_event("info", "egress closed", NULL, c->client, t->method, target, "reason",
			  why);
		return -1;
	}
	if (st == EGP_SNI_OK && egp_sni_matches(sni, t->host))
		return (ssize_t)len;
	if (st == EGP_SNI_OK)
		snprintf(why, sizeof(why),
			 "the TLS server name (SNI) %s is not the CONNECT host (domain fronting)",
			 sni);
	else if (st == EGP_SNI_NEED_MORE && len == EGP_HELLO_MAX)
		snprintf(why, sizeof(why), "%s", egp_sni_status_reason(EGP_SNI_TOO_BIG));
	else if (st == EGP_SNI_NEED_MORE && closed)
		snprintf(why, sizeof(why), "the client closed the tunnel during its ClientHello");
	else if (st == EGP_SNI_NEED_MORE)
		snprintf(why, sizeof(why), "no complete TLS ClientHello within %d ms",
			 hello_timeout_ms);
	else
		snprintf(why, sizeof(why), "%s", egp_sni_status_reason(st));
	log_event("warn", "egress denied", "tls", c->client, t->method, target, "reason", why);
	return -1;
}

static void give_slot(void);

/* Open the CONNECT tunnel of t: answer 200, check the client's TLS hello (its first extra
 * bytes came with the head, at early), then relay both ways. */
static void tunnel(struct conn *c, const egp_target *t, const char *target, const char *early,
		   size_t extra)
{
	struct timeval tv = {0, 0};
	uint8_t *hello = NULL;
	ssize_t hello_len = -1;
	int ufd;

	/* A tunnel carries TLS to the CONNECT host, on every port: its ClientHello must name
	 * that host (no domain fronting, no other protocol), checked before one byte of it goes
	 * upstream. Bytes sent early, with the CONNECT head, count as the hello's start. */
	if (extra > EGP_HELLO_MAX) {
		deny(c, 400, "malformed", t->method, target,
		     "too many bytes sent before the tunnel opened");
		return;
	}
	ufd = open_upstream(c, t, target);
	if (ufd < 0)
		return;
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (write_all(c->fd, "HTTP/1.1 200 Connection established\r\n\r\n", 39) == 0) {
		hello = malloc(EGP_HELLO_MAX);
		if (hello) {
			memcpy(hello, early, extra);
			hello_len = check_client_hello(c, t, target, hello, extra);
		}
	}
	if (hello_len >= 0) {
		log_event("info", "egress allowed", NULL, c->client, t->method, target, NULL, NULL);
		if (write_all(ufd, (const char *)hello, (size_t)hello_len) == 0)
			relay(c->fd, ufd, true);
	}
	close(ufd);
	free(hello);
}

static void *serve(void *arg)
{
	struct conn *c = arg;
	struct timeval tv = {HEAD_TIMEOUT_S, 0};
	char *head = NULL, target[300] = "", *eol;
	ssize_t head_len;
	size_t extra = 0;
	egp_target t;
	const char *reason;
	int rc;

	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	head = malloc(HEAD_CAP + 1);
	if (!head)
		goto out;
	head_len = read_head(c->fd, head, HEAD_CAP, &extra);
	if (head_len < 0) {
		deny(c, 400, "malformed", NULL, NULL,
		     "no complete request head within 16 KiB and 30 s");
		goto out;
	}
	head[head_len + (ssize_t)extra] = '\0';
	eol = memmem(head, (size_t)head_len, "\r\n", 2);
	{
		const char *sp = memchr(head, ' ', (size_t)(eol - head));
		const char *sp2 = sp ? memchr(sp + 1, ' ', (size_t)(eol - sp - 1)) : NULL;

		/* Only logged: a longer target is cut and marked "...", never cut silently. */
		if (sp && sp2 && (size_t)(sp2 - sp - 1) < sizeof(target))
			snprintf(target, sizeof(target), "%.*s", (int)(sp2 - sp - 1), sp + 1);
		else if (sp && sp2)
			snprintf(target, sizeof(target), "%.*s...", (int)sizeof(target) - 4,
				 sp + 1);
	}
	rc = egp_parse_request_line(&t, head, (size_t)(eol - head), &reason);
	if (rc < 0) {
		deny(c, rc == AP_EDENIED ? 403 : 400, rc == AP_EDENIED ? "literal" : "malformed",
		     t.method[0] ? t.method : NULL, target, reason);
		goto out;
	}
	if (locked) {
		deny(c, 403, "locked", t.method, target,
		     "the setup phase is over: the agent phase has no network");
		goto out;
	}
	if (!egp_allowed(rules, n_rules, t.host, t.port)) {
		deny(c, 403, "denied", t.method, target,
		     "host:port is not on the egress allow-list");
		goto out;
	}
	if (!t.connect) {
		forward_http(c, &t, target, head, (size_t)head_len, extra);
		goto out;
	}
	tunnel(c, &t, target, head + head_len, extra);
out:
	free(head);
	close(c->fd);
	free(c);
	give_slot();
	return NULL;
}

/* Before accepting: wait until fewer than max_conns connections are served; meanwhile new ones
 * wait in the listening socket's queue. Returns true when a slot is free (and taken), false
 * when none freed for queue_ms: the next connection is then refused with 503 (and every one
 * after it, until a slot frees). Wakes every LOCK_POLL_MS so a lock is announced. With wait
 * false: only take a slot that is free now. */
static bool take_slot(bool wait)
{
	static long long full_since = -1; /* main thread only */
	bool got = false;

	pthread_mutex_lock(&slot_lock);
	while (!got) {
		struct timespec ts;

		if (active_conns < max_conns) {
			active_conns++;
			full_since = -1;
			got = true;
			break;
		}
		if (full_since < 0)
			full_since = ap_mono_ms();
		if (!wait || locked || ap_mono_ms() - full_since >= queue_ms)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)LOCK_POLL_MS * 1000 * 1000;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&slot_freed, &slot_lock, &ts);
	}
	pthread_mutex_unlock(&slot_lock);
	return got;
}

static void give_slot(void)
{
	pthread_mutex_lock(&slot_lock);
	active_conns--;
	pthread_cond_signal(&slot_freed);
	pthread_mutex_unlock(&slot_lock);
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
		"[--queue-ms N] [--hello-timeout-ms N]\n",
		msg);
	return 2;
}

/* The command line (globals: the rules, nets, limits and the client net; the rest here). */
struct args {
	const char *listen_net, *listen_addr;
	int listen_fd;
	long port;
};

/* Parse argv into a and the globals. 0, or the exit code of a usage error. */
static int parse_args(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			return usage("missing value");
		i++;
		if (strcmp(o, "--listen-net") == 0) {
			a->listen_net = v;
		} else if (strcmp(o, "--listen-fd") == 0) {
			a->listen_fd = (int)strtol(v, NULL, 10);
		} else if (strcmp(o, "--client") == 0) {
			if (egp_net_parse(&client_net, v) < 0)
				return usage("bad --client");
			have_client_net = true;
		} else if (strcmp(o, "--parent") == 0) {
			parent = (pid_t)strtol(v, NULL, 10);
		} else if (strcmp(o, "--listen") == 0) {
			a->listen_addr = v;
		} else if (strcmp(o, "--port") == 0) {
			a->port = strtol(v, NULL, 10);
		} else if (strcmp(o, "--max-conns") == 0) {
			max_conns = atoi(v);
		} else if (strcmp(o, "--queue-ms") == 0) {
			queue_ms = atoi(v);
		} else if (strcmp(o, "--hello-timeout-ms") == 0) {
			hello_timeout_ms = atoi(v);
		} else if (strcmp(o, "--allow") == 0) {
			if (n_rules == MAX_RULES || egp_rule_parse(&rules[n_rules++], v) < 0)
				return usage(ap_error_last()[0] ? ap_error_last()
								: "too many rules");
		} else if (strcmp(o, "--allow-net") == 0) {
			if (n_nets == MAX_NETS || egp_net_parse(&nets[n_nets++], v) < 0)
				return usage(ap_error_last()[0] ? ap_error_last()
								: "too many nets");
		} else {
			return usage("unknown option");
		}
	}
	if (a->port < 0 || a->port > 65535 || max_conns < 1 || max_conns > 4096 || queue_ms < 0 ||
	    queue_ms > 3600000 || hello_timeout_ms < 1 || hello_timeout_ms > 600000)
		return usage("bad --port, --max-conns, --queue-ms or --hello-timeout-ms");
	if (a->listen_net && !have_client_net && egp_net_parse(&client_net, a->listen_net) == 0)
		have_client_net = true;
	return 0;
}

/* SIGPIPE ignored; SIGUSR1 locks the proxy (no SA_RESTART: accept() returns to announce
 * it); with --parent, a watcher ends the proxy when the parent goes. 0 or 1. */
static int install_signals(void)
{
	struct sigaction sa;

	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_lock;
	sigaction(SIGUSR1, &sa, NULL);
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
	return 0;
}

/* The address to listen on, unless a socket is handed over (--listen-fd). 0, or the exit
 * code of a usage error. */
static int resolve_listen(const struct args *a, struct sockaddr_storage *ss, socklen_t *slen)
{
	if (a->listen_fd >= 0)
		return 0;
	if (a->listen_net ? find_listen_addr(a->listen_net, ss, slen) < 0
			  : !a->listen_addr || parse_listen(a->listen_addr, ss, slen) < 0)
		return usage("no address to listen on (--listen-net matched no interface?)");
	return 0;
}

/* The listening socket: the one handed over (--listen-fd), or a new one bound to ss (from
 * resolve_listen); ss then holds the address it listens on. The socket, or -1 (printed). */
static int listen_socket(const struct args *a, struct sockaddr_storage *ss, socklen_t slen)
{
	int lfd, one = 1;

	if (a->listen_fd >= 0) {
		lfd = a->listen_fd;
		slen = sizeof(*ss);
		if (getsockname(lfd, (struct sockaddr *)ss, &slen) < 0 ||
		    fcntl(lfd, F_SETFD, FD_CLOEXEC) < 0) {
			fprintf(stderr, "autopatch-egress-proxy: --listen-fd %d: %s\n", lfd,
				strerror(errno));
			return -1;
		}
		return lfd;
	}
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)a->port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)a->port);
	lfd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)ss, slen) < 0 || listen(lfd, LISTEN_BACKLOG) < 0 ||
	    getsockname(lfd, (struct sockaddr *)ss, &slen) < 0) {
		fprintf(stderr, "autopatch-egress-proxy: cannot listen: %s\n", strerror(errno));
		return -1;
	}
	return lfd;
}

/* "addr:port" or "[addr]:port" of ss into shown. */
static void show_addr(const struct sockaddr_storage *ss, char shown[INET6_ADDRSTRLEN + 8])
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, shown, INET6_ADDRSTRLEN);
		snprintf(shown + strlen(shown), 8, ":%u", ntohs(s4->sin_port));
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		shown[0] = '[';
		inet_ntop(AF_INET6, &s6->sin6_addr, shown + 1, INET6_ADDRSTRLEN);
		snprintf(shown + strlen(shown), 9, "]:%u", ntohs(s6->sin6_port));
	}
}

/* A slot to serve one more connection: at once, or within queue_ms; false when none freed
 * (the caller then refuses what waits) or when there is nothing to accept yet (*idle). */
static bool wait_slot(int lfd, bool *idle)
{
	struct pollfd p = {lfd, POLLIN, 0};

	*idle = false;
	if (take_slot(true))
		return true;
	/* Full for queue_ms: refuse what waits (unless a slot freed meanwhile), but do not
	 * block in accept(). */
	if (poll(&p, 1, LOCK_POLL_MS) <= 0) {
		*idle = true;
		return false;
	}
	return take_slot(false);
}

/* Refuse c when it may not be served: not on the job's network, or no slot (locked, or
 * the connection limit). true when it was refused. */
static bool refused(struct conn *c, const struct sockaddr_storage *peer, bool slot)
{
	if (have_client_net && !egp_net_contains(&client_net, (const struct sockaddr *)peer)) {
		/* Defence in depth: whatever routes a packet to the listening address, serve
		 * only clients on the job's network. */
		deny(c, 403, "client", NULL, NULL, "the client is not on the job's network");
		return true;
	}
	if (!slot && locked) {
		deny(c, 403, "locked", NULL, NULL,
		     "the setup phase is over: the agent phase has no network");
		return true;
	}
	if (!slot) {
		char why[160];

		snprintf(why, sizeof(why),
			 "too many concurrent connections: %d open, none closed within %d s",
			 max_conns, queue_ms / 1000);
		deny(c, 503, "limit", NULL, NULL, why);
		return true;
	}
	return false;
}

/* Accept one connection and hand it to a thread of its own (or refuse it). */
static void accept_one(int lfd, pthread_attr_t *attr)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	sigset_t usr1, prev;
	struct conn *c;
	pthread_t th;
	bool slot, idle;
	int fd, started;

	slot = wait_slot(lfd, &idle);
	if (idle)
		return;
	fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
	if (fd < 0 || !(c = calloc(1, sizeof(*c)))) {
		if (fd >= 0)
			close(fd);
		if (slot)
			give_slot();
		return;
	}
	c->fd = fd;
	if (peer.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, c->client,
			  sizeof(c->client));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, c->client,
			  sizeof(c->client));
	if (refused(c, &peer, slot)) {
		close(fd);
		free(c);
		if (slot)
			give_slot();
		return;
	}
	/* Only the main thread takes SIGUSR1, so its accept() wakes up to log the lock. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &prev);
	started = pthread_create(&th, attr, serve, c);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (started != 0) {
		close(fd);
		free(c);
		give_slot();
	}
}

int main(int argc, char **argv)
{
	struct args a = {.listen_fd = -1, .port = 3128};
	struct sockaddr_storage ss;
	char shown[INET6_ADDRSTRLEN + 8];
	bool announced = false;
	pthread_attr_t attr;
	socklen_t slen = 0;
	int rc, lfd;

	memset(&ss, 0, sizeof(ss));
	if ((rc = parse_args(argc, argv, &a)) || (rc = resolve_listen(&a, &ss, &slen)) ||
	    (rc = install_signals()))
		return rc;
	if ((lfd = listen_socket(&a, &ss, slen)) < 0)
		return 1;
	show_addr(&ss, shown);
	log_event("info", "egress proxy listening", NULL, NULL, NULL, NULL, "addr", shown);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		if (locked && !announced) {
			announced = true;
			log_event("info", "egress locked", NULL, NULL, NULL, NULL, NULL, NULL);
		}
		accept_one(lfd, &attr);
	}
}
