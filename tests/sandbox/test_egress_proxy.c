/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_egress_proxy.c - the real proxy program on the host's loopback: every
 * kind of request it must refuse gets 403/400 with a reason and one "egress denied" JSON line,
 * and a listed name that resolves to loopback never reaches the server listening there.
 *
 * The allowed path needs a name that resolves to an operator-listed address: the last group
 * runs in network and mount namespaces of its own (root, or an unprivileged user namespace;
 * skipped where neither is possible) with 10.199.0.1 on its loopback device and /etc/hosts
 * naming it allowed.example and other.example, and an upstream server listening there. It
 * checks the TLS ClientHello rule of CONNECT tunnels: SNI = CONNECT host is forwarded byte
 * for byte; another name, none, or not TLS at all is refused before anything is forwarded. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

struct proxy {
	pid_t pid;
	int err_fd;    /* the proxy's stderr */
	int port;      /* where it listens */
	int target_fd; /* a server on 127.0.0.1 the proxy must never reach */
	int target_port;
	char log[65536]; /* stderr read so far */
	size_t log_len;
};

static struct proxy px;

/* Read the proxy's stderr until its part from offset `from` contains needle, or 5 s pass. */
static bool log_wait(const char *needle, size_t from)
{
	for (int i = 0; i < 100; i++) {
		struct pollfd p = {px.err_fd, POLLIN, 0};
		ssize_t r;

		px.log[px.log_len] = '\0';
		if (strstr(px.log + from, needle))
			return true;
		if (poll(&p, 1, 50) == 1) {
			r = read(px.err_fd, px.log + px.log_len, sizeof(px.log) - 1 - px.log_len);
			if (r > 0)
				px.log_len += (size_t)r;
		}
	}
	return false;
}

static int listen_loopback(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Start the proxy listening on 127.0.0.1 (any port) with these further arguments (at most
 * 16, NULL-terminated) and wait until it says where it listens. */
static void start_proxy(const char *const *args)
{
	const char *root = getenv("AP_BUILD_ROOT");
	const char *argv[24] = {NULL, "--listen", "127.0.0.1", "--port", "0"};
	char bin[4096], *p;
	size_t n = 5;
	int errp[2];

	assert_non_null(root);
	snprintf(bin, sizeof(bin), "%s/sandbox/autopatch-egress-proxy", root);
	argv[0] = bin;
	for (; *args && n + 1 < sizeof(argv) / sizeof(argv[0]); args++)
		argv[n++] = *args;
	px.log_len = 0;
	assert_int_equal(pipe(errp), 0);
	px.pid = fork();
	assert_true(px.pid >= 0);
	if (px.pid == 0) {
		dup2(errp[1], 2);
		close(errp[0]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(errp[1]);
	px.err_fd = errp[0];
	assert_true(log_wait("egress proxy listening", 0));
	p = strstr(px.log, "\"addr\":\"127.0.0.1:");
	assert_non_null(p);
	px.port = atoi(p + strlen("\"addr\":\"127.0.0.1:"));
	assert_true(px.port > 0);
}

static int setup(void **state)
{
	char allow_lo[64];
	const char *args[] = {"--allow",     allow_lo,	   "--allow", "mirror.example:443",
			      "--allow-net", "10.0.0.0/8", NULL};

	(void)state;
	px.target_fd = listen_loopback(&px.target_port);
	fcntl(px.target_fd, F_SETFL, O_NONBLOCK);
	snprintf(allow_lo, sizeof(allow_lo), "localhost:%d", px.target_port);
	start_proxy(args);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	kill(px.pid, SIGTERM);
	waitpid(px.pid, NULL, 0);
	close(px.err_fd);
	close(px.target_fd);
	return 0;
}

/* Send one request to the proxy; return its whole answer (until it closes). */
static void ask(const char *req, char *out, size_t n)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px.port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	size_t len = 0;
	ssize_t r;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while (len + 1 < n && (r = read(fd, out + len, n - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = '\0';
	close(fd);
}

static void assert_denied(const char *req, const char *status, const char *reason)
{
	char ans[4096], line[256];
	size_t before = px.log_len;

	ask(req, ans, sizeof(ans));
	if (strncmp(ans, status, strlen(status)) != 0)
		fail_msg("%s -> %s", req, ans);
	assert_non_null(strstr(ans, reason));
	snprintf(line, sizeof(line), "\"reason\":\"%s", reason);
	assert_true(log_wait(line, before));
	assert_non_null(strstr(px.log + before, "\"msg\":\"egress denied\""));
}

static void assert_target_untouched(void)
{
	int fd = accept(px.target_fd, NULL, NULL);

	if (fd >= 0)
		fail_msg("the proxy connected to the loopback server");
}

static void test_not_listed_host_is_403(void **state)
{
	(void)state;
	assert_denied("CONNECT other.example:443 HTTP/1.1\r\nHost: other.example:443\r\n\r\n",
		      "HTTP/1.1 403", "host:port is not on the egress allow-list");
	assert_denied("GET http://mirror.example/x HTTP/1.1\r\n\r\n", "HTTP/1.1 403",
		      "host:port is not on the egress allow-list");
}

static void test_ip_literals_are_403(void **state)
{
	char req[256];
	static const char *hosts[] = {"127.0.0.1", "2130706433",      "0x7f000001", "127.1",
				      "[::1]",	   "169.254.169.254", NULL};

	(void)state;
	for (const char **h = hosts; *h; h++) {
		snprintf(req, sizeof(req), "CONNECT %s:%d HTTP/1.1\r\n\r\n", *h, px.target_port);
		assert_denied(req, "HTTP/1.1 403", "IP address literals are not allowed");
		snprintf(req, sizeof(req), "GET http://%s:%d/ HTTP/1.1\r\n\r\n", *h,
			 px.target_port);
		assert_denied(req, "HTTP/1.1 403", "IP address literals are not allowed");
	}
	assert_target_untouched();
}

static void test_listed_name_resolving_to_loopback_is_403(void **state)
{
	char req[256];

	(void)state;
	snprintf(req, sizeof(req), "CONNECT localhost:%d HTTP/1.1\r\n\r\n", px.target_port);
	assert_denied(req, "HTTP/1.1 403", "the name resolves to a loopback address");
	snprintf(req, sizeof(req), "GET http://localhost:%d/ HTTP/1.1\r\n\r\n", px.target_port);
	assert_denied(req, "HTTP/1.1 403", "the name resolves to a loopback address");
	assert_target_untouched();
}

static void test_malformed_requests_are_400(void **state)
{
	(void)state;
	assert_denied("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "HTTP/1.1 400",
		      "only CONNECT and absolute http:// request targets are proxied");
	assert_denied("GET https://mirror.example/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400",
		      "https:// request targets are not proxied");
	assert_denied("CONNECT mirror.example HTTP/1.1\r\n\r\n", "HTTP/1.1 400",
		      "CONNECT needs host:port");
	assert_denied("garbage\r\n\r\n", "HTTP/1.1 400", "malformed request line");
}

/* Body framing the proxy does not forward: checked before any name is resolved. */
static void test_smuggling_shapes_are_400(void **state)
{
	char req[256];

	(void)state;
	snprintf(req, sizeof(req),
		 "POST http://localhost:%d/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		 px.target_port);
	assert_denied(req, "HTTP/1.1 400", "chunked request bodies are not supported");
	snprintf(req, sizeof(req),
		 "POST http://localhost:%d/ HTTP/1.1\r\nContent-Length: 1\r\n"
		 "Content-Length: 5\r\n\r\n",
		 px.target_port);
	assert_denied(req, "HTTP/1.1 400", "bad, repeated or too large Content-Length");
	snprintf(req, sizeof(req),
		 "POST http://localhost:%d/ HTTP/1.1\r\nContent-Length: 9999999999\r\n\r\n",
		 px.target_port);
	assert_denied(req, "HTTP/1.1 400", "bad, repeated or too large Content-Length");
	snprintf(req, sizeof(req), "GET http://localhost:%d/ HTTP/1.1\r\n folded\r\n\r\n",
		 px.target_port);
	assert_denied(req, "HTTP/1.1 400", "malformed request header");
	assert_target_untouched();
}

static void test_log_line_escapes_hostile_bytes(void **state)
{
	(void)state;
	assert_denied("CONNECT a\"b\\c:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 400",
		      "not a valid host name");
	assert_non_null(strstr(px.log, "\"target\":\"a\\\"b\\\\c:443\""));
}

/* --listen-net: the proxy binds its address on that network and refuses clients from any
 * other address (here: listens on 127.0.0.1/32, a client bound to 127.0.0.2 is refused). */
static void test_listen_net_refuses_other_clients(void **state)
{
	const char *root = getenv("AP_BUILD_ROOT");
	char bin[4096], ans[1024], log[4096] = "", *p;
	int errp[2], port, fd, n;
	size_t len = 0, got = 0;
	pid_t pid;
	struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
	static const char req[] = "CONNECT mirror.example:443 HTTP/1.1\r\n\r\n";

	(void)state;
	snprintf(bin, sizeof(bin), "%s/sandbox/autopatch-egress-proxy", root);
	assert_int_equal(pipe(errp), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(errp[1], 2);
		execl(bin, bin, "--listen-net", "127.0.0.1/32", "--port", "0", "--allow",
		      "mirror.example:443", (char *)NULL);
		_exit(127);
	}
	close(errp[1]);
	for (int i = 0; i < 100 && !strstr(log, "listening"); i++) {
		struct pollfd pf = {errp[0], POLLIN, 0};

		log[len] = '\0';
		if (poll(&pf, 1, 50) == 1 &&
		    (n = (int)read(errp[0], log + len, sizeof(log) - 1 - len)) > 0)
			len += (size_t)n;
		log[len] = '\0';
	}
	p = strstr(log, "\"addr\":\"127.0.0.1:");
	assert_non_null(p);
	port = atoi(p + strlen("\"addr\":\"127.0.0.1:"));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	src.sin_addr.s_addr = htonl(0x7f000002);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	dst.sin_port = htons((uint16_t)port);
	assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
	if (write(fd, req, sizeof(req) - 1) < 0) {
		/* the proxy may already have answered and closed */
	}
	while (got + 1 < sizeof(ans) && (n = (int)read(fd, ans + got, sizeof(ans) - 1 - got)) > 0)
		got += (size_t)n;
	ans[got] = '\0';
	close(fd);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	close(errp[0]);
	assert_non_null(strstr(ans, "HTTP/1.1 403"));
	assert_non_null(strstr(ans, "the client is not on the job's network"));
}

/* --- CONNECT tunnels and the TLS ClientHello, in namespaces of their own ------------------- */

#define UPSTREAM_ADDR "10.199.0.1"
/* lan.example: a private address outside every --allow-net of these tests */
#define HOSTS_TEXT UPSTREAM_ADDR " allowed.example other.example\n10.77.0.1 lan.example\n"

static bool have_netns;	    /* the namespaces are set up: else every tunnel test skips */
static int upstream_fd;	    /* listens on UPSTREAM_ADDR:443 */
static int upstream_alt_fd; /* listens on UPSTREAM_ADDR:8443 */

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* New network + mount namespaces (as root, else inside a user namespace), loopback up with
 * UPSTREAM_ADDR on it, and /etc/hosts replaced by one naming it. */
static bool enter_namespaces(void)
{
	char hosts[] = "/tmp/ap-egress-hosts-XXXXXX", map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	int fd, sk;
	bool ok;

	if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0)
			return false;
		write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		if (!write_file("/proc/self/uid_map", map))
			return false;
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		if (!write_file("/proc/self/gid_map", map))
			return false;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return false;
	fd = mkstemp(hosts);
	if (fd < 0)
		return false;
	ok = write(fd, HOSTS_TEXT, strlen(HOSTS_TEXT)) > 0;
	close(fd);
	ok = ok && mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL) == 0;
	unlink(hosts);
	sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ok = ok && sk >= 0 && ioctl(sk, SIOCGIFFLAGS, &ifr) == 0;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	ok = ok && ioctl(sk, SIOCSIFFLAGS, &ifr) == 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo:1");
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, UPSTREAM_ADDR, &sin->sin_addr);
	ok = ok && ioctl(sk, SIOCSIFADDR, &ifr) == 0;
	inet_pton(AF_INET, "255.255.255.255", &sin->sin_addr);
	ok = ok && ioctl(sk, SIOCSIFNETMASK, &ifr) == 0;
	if (sk >= 0)
		close(sk);
	return ok;
}

static int listen_upstream(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, UPSTREAM_ADDR, &sa.sin_addr);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	return fd;
}

static int setup_tunnels(void **state)
{
	static const char *const args[] = {"--allow",
					   "allowed.example:443",
					   "--allow",
					   "allowed.example:8443",
					   "--allow-net",
					   "10.199.0.0/24",
					   "--hello-timeout-ms",
					   "700",
					   NULL};

	(void)state;
	have_netns = enter_namespaces();
	if (!have_netns)
		return 0;
	upstream_fd = listen_upstream(443);
	upstream_alt_fd = listen_upstream(8443);
	start_proxy(args);
	return 0;
}

static int teardown_tunnels(void **state)
{
	(void)state;
	if (!have_netns)
		return 0;
	kill(px.pid, SIGTERM);
	waitpid(px.pid, NULL, 0);
	close(px.err_fd);
	close(upstream_fd);
	close(upstream_alt_fd);
	return 0;
}

/* The first flight of an OpenSSL client naming sni (NULL: no server name). */
static size_t client_hello(const char *sni, unsigned char *buf, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = ctx ? SSL_new(ctx) : NULL;
	int n;

	assert_non_null(ssl);
	SSL_set_bio(ssl, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	if (sni)
		assert_int_equal(SSL_set_tlsext_host_name(ssl, sni), 1);
	SSL_set_connect_state(ssl);
	SSL_do_handshake(ssl);
	n = BIO_read(SSL_get_wbio(ssl), buf, (int)cap);
	assert_true(n > 0);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

/* Read from fd until n bytes, EOF or 3 s; returns the count. */
static size_t read_some(int fd, unsigned char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t r;

		if (poll(&p, 1, 3000) != 1)
			break;
		r = read(fd, buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Open a tunnel: CONNECT target, then early (may be NULL) in the same write. Returns the
 * client socket with the proxy's "200 Connection established" read. */
static int open_tunnel(const char *target, const unsigned char *early, size_t early_len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px.port)};
	unsigned char req[8192], ans[64];
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int n = snprintf((char *)req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
			 target, target);

	assert_true(early_len <= sizeof(req) - (size_t)n);
	if (early)
		memcpy(req + n, early, early_len);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, req, (size_t)n + early_len), (ssize_t)((size_t)n + early_len));
	assert_int_equal(read_some(fd, ans, sizeof(ok) - 1), sizeof(ok) - 1);
	assert_memory_equal(ans, ok, sizeof(ok) - 1);
	return fd;
}

/* The upstream side of the tunnel the proxy opened (it connects before answering 200). */
static int accept_upstream(int lfd)
{
	struct pollfd p = {lfd, POLLIN, 0};

	assert_int_equal(poll(&p, 1, 3000), 1);
	return accept(lfd, NULL, NULL);
}

/* A tunnel the proxy must refuse: after the 200, it closes the client without forwarding a
 * byte upstream, and logs one denial with reason. */
static void assert_tunnel_refused(const char *target, int lfd, const unsigned char *bytes, size_t n,
				  const char *reason)
{
	unsigned char buf[256];
	char line[300];
	size_t before = px.log_len;
	int fd = open_tunnel(target, NULL, 0), up;

	up = accept_upstream(lfd);
	assert_true(up >= 0);
	if (n)
		assert_int_equal(write(fd, bytes, n), (ssize_t)n);
	assert_int_equal(read_some(fd, buf, sizeof(buf)), 0); /* closed, nothing came back */
	assert_int_equal(read_some(up, buf, sizeof(buf)), 0); /* nothing went upstream */
	close(up);
	close(fd);
	snprintf(line, sizeof(line), "\"reason\":\"%s", reason);
	if (!log_wait(line, before))
		fail_msg("no denial with reason \"%s\" in: %s", reason, px.log + before);
	assert_non_null(strstr(px.log + before, "\"msg\":\"egress denied\""));
	assert_null(strstr(px.log + before, "\"msg\":\"egress allowed\""));
}

/* A tunnel the proxy must forward: the hello arrives upstream byte for byte, and bytes flow
 * back. early: send the hello in the CONNECT's own write; split: in two writes 100 ms apart. */
static void assert_tunnel_forwarded(const char *target, int lfd, const char *sni, bool early,
				    bool split)
{
	unsigned char hello[4096], got[4096];
	size_t n = client_hello(sni, hello, sizeof(hello)), before = px.log_len;
	int fd, up;

	fd = open_tunnel(target, early ? hello : NULL, early ? n : 0);
	up = accept_upstream(lfd);
	assert_true(up >= 0);
	if (!early && split) {
		assert_int_equal(write(fd, hello, 20), 20);
		usleep(100 * 1000);
		assert_int_equal(write(fd, hello + 20, n - 20), (ssize_t)(n - 20));
	} else if (!early) {
		assert_int_equal(write(fd, hello, n), (ssize_t)n);
	}
	assert_int_equal(read_some(up, got, n), n);
	assert_memory_equal(got, hello, n);
	assert_int_equal(write(up, "pong", 4), 4);
	assert_int_equal(read_some(fd, got, 4), 4);
	assert_memory_equal(got, "pong", 4);
	close(up);
	close(fd);
	assert_true(log_wait("\"msg\":\"egress allowed\"", before));
	assert_null(strstr(px.log + before, "egress denied"));
}

static void test_tunnel_with_matching_sni_is_forwarded(void **state)
{
	(void)state;
	if (!have_netns)
		skip();
	assert_tunnel_forwarded("allowed.example:443", upstream_fd, "allowed.example", false,
				false);
	assert_tunnel_forwarded("allowed.example:443", upstream_fd, "ALLOWED.Example", false, true);
	assert_tunnel_forwarded("Allowed.Example.:443", upstream_fd, "allowed.example", true,
				false);
	assert_tunnel_forwarded("allowed.example:8443", upstream_alt_fd, "allowed.example", false,
				false);
}

static void test_tunnel_with_other_sni_is_refused(void **state)
{
	unsigned char hello[4096];
	size_t n;

	(void)state;
	if (!have_netns)
		skip();
	n = client_hello("other.example", hello, sizeof(hello));
	assert_tunnel_refused("allowed.example:443", upstream_fd, hello, n,
			      "the TLS server name (SNI) other.example is not the CONNECT host");
	n = client_hello("allowed.example.", hello, sizeof(hello));
	assert_tunnel_refused("allowed.example:443", upstream_fd, hello, n,
			      "the TLS server name (SNI) allowed.example. is not the CONNECT host");
	n = client_hello(NULL, hello, sizeof(hello));
	assert_tunnel_refused("allowed.example:443", upstream_fd, hello, n,
			      "the TLS ClientHello names no server (SNI missing)");
}

/* Not TLS: refused on 443 and on every other allowed port alike (docs/egress.md). */
static void test_tunnel_without_tls_is_refused_on_every_port(void **state)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: other.example\r\n\r\n";
	unsigned char hello[4096];
	size_t n;

	(void)state;
	if (!have_netns)
		skip();
	assert_tunnel_refused("allowed.example:443", upstream_fd, (const unsigned char *)get,
			      sizeof(get) - 1, "the tunnel did not start with a TLS ClientHello");
	assert_tunnel_refused("allowed.example:8443", upstream_alt_fd, (const unsigned char *)get,
			      sizeof(get) - 1, "the tunnel did not start with a TLS ClientHello");
	/* half a hello, then silence: the deadline (700 ms here) refuses it */
	n = client_hello("allowed.example", hello, sizeof(hello));
	assert_tunnel_refused("allowed.example:443", upstream_fd, hello, n / 2,
			      "no complete TLS ClientHello within 700 ms");
	/* and nothing at all: closed the same way, logged as closed (nothing was refused) */
	{
		unsigned char buf[64];
		size_t before = px.log_len;
		int fd = open_tunnel("allowed.example:443", NULL, 0), up;

		up = accept_upstream(upstream_fd);
		assert_true(up >= 0);
		assert_int_equal(read_some(fd, buf, sizeof(buf)), 0);
		assert_int_equal(read_some(up, buf, sizeof(buf)), 0);
		close(up);
		close(fd);
		assert_true(
		    log_wait("\"reason\":\"no byte within 700 ms after the tunnel opened", before));
		assert_non_null(strstr(px.log + before, "\"msg\":\"egress closed\""));
		assert_null(strstr(px.log + before, "\"msg\":\"egress denied\""));
		assert_null(strstr(px.log + before, "\"msg\":\"egress allowed\""));
	}
}

/* ---- limits: a connection cap that queues, and the kind of every refusal ----
 *
 * In the same namespaces: a plain-HTTP server on UPSTREAM_ADDR:80 answers each request after
 * 200 ms (3 s for /slow), one thread per connection, and counts how many it serves at once.
 * The proxy serves at most 3 connections and lets others wait 1 s. */

static int http_fd;
static atomic_int http_now, http_peak;

static void *http_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, now;
	char req[2048];
	size_t len = 0;
	ssize_t r;
	struct timespec ts = {0, 200 * 1000 * 1000};

	now = atomic_fetch_add(&http_now, 1) + 1;
	for (int peak = atomic_load(&http_peak);
	     now > peak && !atomic_compare_exchange_weak(&http_peak, &peak, now);)
		;
	while (len + 1 < sizeof(req) && (r = read(fd, req + len, sizeof(req) - 1 - len)) > 0) {
		len += (size_t)r;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[len] = '\0';
	if (strstr(req, "GET /slow "))
		ts = (struct timespec){3, 0};
	nanosleep(&ts, NULL);
	atomic_fetch_sub(&http_now, 1);
	if (write(fd, "HTTP/1.0 200 OK\r\n\r\nok", 21) < 0) {
		/* the client gave up */
	}
	close(fd);
	return NULL;
}

static void *http_server(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(http_fd, NULL, NULL);
		pthread_t th;

		if (fd < 0)
			return NULL;
		if (pthread_create(&th, NULL, http_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(th);
		else
			close(fd);
	}
}

static int setup_limits(void **state)
{
	static const char *const args[] = {"--allow",	  "allowed.example:80",
					   "--allow",	  "lan.example:80",
					   "--allow",	  "nowhere.invalid:80",
					   "--allow-net", "10.199.0.0/24",
					   "--max-conns", "3",
					   "--queue-ms",  "1000",
					   NULL};
	pthread_t th;

	(void)state;
	if (!have_netns)
		return 0;
	http_fd = listen_upstream(80);
	assert_int_equal(pthread_create(&th, NULL, http_server, NULL), 0);
	pthread_detach(th);
	start_proxy(args);
	return 0;
}

static int teardown_limits(void **state)
{
	(void)state;
	if (!have_netns)
		return 0;
	kill(px.pid, SIGTERM);
	waitpid(px.pid, NULL, 0);
	close(px.err_fd);
	shutdown(http_fd, SHUT_RDWR);
	close(http_fd);
	return 0;
}

struct get {
	pthread_t th;
	const char *path;
	char ans[256];
};

static void *get_thread(void *arg)
{
	struct get *g = arg;
	char req[128];

	snprintf(req, sizeof(req), "GET http://allowed.example%s HTTP/1.1\r\n\r\n", g->path);
	ask(req, g->ans, sizeof(g->ans));
	return NULL;
}

/* 20 requests at once through a proxy that serves 3 at a time: every one is answered (the
 * rest wait in its queue), and the server never sees more than 3 at once. */
static void test_a_burst_beyond_the_cap_waits_and_is_served(void **state)
{
	struct get g[20];

	(void)state;
	if (!have_netns)
		skip();
	atomic_store(&http_peak, 0);
	for (size_t i = 0; i < 20; i++) {
		g[i].path = "/";
		assert_int_equal(pthread_create(&g[i].th, NULL, get_thread, &g[i]), 0);
	}
	for (size_t i = 0; i < 20; i++) {
		pthread_join(g[i].th, NULL);
		if (strncmp(g[i].ans, "HTTP/1.0 200", 12) != 0)
			fail_msg("request %zu: %s", i, g[i].ans);
	}
	assert_true(atomic_load(&http_peak) <= 3);
	assert_true(atomic_load(&http_peak) >= 2);
	assert_null(strstr(px.log, "\"kind\":\"limit\""));
}

/* Three slow requests hold every slot longer than the queue wait: the fourth connection is
 * refused with 503 and a "limit" line that says how many were open. */
static void test_a_full_proxy_refuses_after_the_queue_wait(void **state)
{
	struct get g[3];
	char ans[1024];
	size_t before = px.log_len;
	struct timespec ts = {0, 300 * 1000 * 1000};

	(void)state;
	if (!have_netns)
		skip();
	for (size_t i = 0; i < 3; i++) {
		g[i].path = "/slow";
		assert_int_equal(pthread_create(&g[i].th, NULL, get_thread, &g[i]), 0);
	}
	nanosleep(&ts, NULL);
	ask("GET http://allowed.example/ HTTP/1.1\r\n\r\n", ans, sizeof(ans));
	if (strncmp(ans, "HTTP/1.1 503", 12) != 0)
		fail_msg("the 4th connection got: %s", ans);
	assert_non_null(strstr(ans, "too many concurrent connections: 3 open, none closed within "
				    "1 s"));
	assert_true(log_wait("\"kind\":\"limit\"", before));
	for (size_t i = 0; i < 3; i++) {
		pthread_join(g[i].th, NULL);
		assert_int_equal(strncmp(g[i].ans, "HTTP/1.0 200", 12), 0);
	}
}

/* Each refusal's log line carries the kind the host's report groups by. */
static void test_every_refusal_names_its_kind(void **state)
{
	static const struct {
		const char *req, *status, *kind, *reason;
	} cases[] = {
	    {"GET http://other.example/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "denied",
	     "not on the egress allow-list"},
	    {"GET http://lan.example/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "reserved",
	     "the name resolves to a private address (10.77.0.1)"},
	    {"GET http://nowhere.invalid/ HTTP/1.1\r\n\r\n", "HTTP/1.1 502", "dns",
	     "cannot resolve nowhere.invalid"},
	    {"GET http://10.199.0.1/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "literal",
	     "IP address literals"},
	};
	char ans[1024], kind[64];

	(void)state;
	if (!have_netns)
		skip();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t before = px.log_len;

		ask(cases[i].req, ans, sizeof(ans));
		if (strncmp(ans, cases[i].status, 12) != 0 || !strstr(ans, cases[i].reason))
			fail_msg("%s -> %s", cases[i].req, ans);
		snprintf(kind, sizeof(kind), "\"kind\":\"%s\"", cases[i].kind);
		if (!log_wait(kind, before))
			fail_msg("no %s line for %s: %s", kind, cases[i].req, px.log + before);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_listed_host_is_403),
	    cmocka_unit_test(test_ip_literals_are_403),
	    cmocka_unit_test(test_listed_name_resolving_to_loopback_is_403),
	    cmocka_unit_test(test_malformed_requests_are_400),
	    cmocka_unit_test(test_smuggling_shapes_are_400),
	    cmocka_unit_test(test_log_line_escapes_hostile_bytes),
	};
	const struct CMUnitTest alone[] = {
	    cmocka_unit_test(test_listen_net_refuses_other_clients),
	};
	/* last: it moves this process into namespaces of its own */
	const struct CMUnitTest tunnels[] = {
	    cmocka_unit_test(test_tunnel_with_matching_sni_is_forwarded),
	    cmocka_unit_test(test_tunnel_with_other_sni_is_refused),
	    cmocka_unit_test(test_tunnel_without_tls_is_refused_on_every_port),
	};

	const struct CMUnitTest limits[] = {
	    cmocka_unit_test(test_a_burst_beyond_the_cap_waits_and_is_served),
	    cmocka_unit_test(test_a_full_proxy_refuses_after_the_queue_wait),
	    cmocka_unit_test(test_every_refusal_names_its_kind),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown) |
	       cmocka_run_group_tests(alone, NULL, NULL) |
	       cmocka_run_group_tests(tunnels, setup_tunnels, teardown_tunnels) |
	       cmocka_run_group_tests(limits, setup_limits, teardown_limits);
}
