/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_egress_proxy.c - the real proxy program on the host's loopback: every
 * kind of request it must refuse gets 403/400 with a reason and one "egress denied" JSON line,
 * and a listed name that resolves to loopback never reaches the server listening there.
 * (The allowed path needs a public or operator-listed address: tests/e2e/test_egress.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

static int setup(void **state)
{
	const char *root = getenv("AP_BUILD_ROOT");
	char bin[4096], allow_lo[64], *p;
	int errp[2];

	(void)state;
	assert_non_null(root);
	snprintf(bin, sizeof(bin), "%s/sandbox/autopatch-egress-proxy", root);
	px.target_fd = listen_loopback(&px.target_port);
	fcntl(px.target_fd, F_SETFL, O_NONBLOCK);
	snprintf(allow_lo, sizeof(allow_lo), "localhost:%d", px.target_port);
	assert_int_equal(pipe(errp), 0);
	px.pid = fork();
	assert_true(px.pid >= 0);
	if (px.pid == 0) {
		dup2(errp[1], 2);
		close(errp[0]);
		execl(bin, bin, "--listen", "127.0.0.1", "--port", "0", "--allow", allow_lo,
		      "--allow", "mirror.example:443", "--allow-net", "10.0.0.0/8", (char *)NULL);
		_exit(127);
	}
	close(errp[1]);
	px.err_fd = errp[0];
	assert_true(log_wait("egress proxy listening", 0));
	p = strstr(px.log, "\"addr\":\"127.0.0.1:");
	assert_non_null(p);
	px.port = atoi(p + strlen("\"addr\":\"127.0.0.1:"));
	assert_true(px.port > 0);
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

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown) |
	       cmocka_run_group_tests(alone, NULL, NULL);
}
