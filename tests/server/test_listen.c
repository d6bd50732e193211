/* SPDX-License-Identifier: MIT */
/* tests/server/test_listen.c - listener settings and unix sockets (server/listen.c), and the
 * connection deadline watcher (server/deadline.c) on socket pairs. */
#include "common/err.h"
#include "server/deadline.h"
#include "server/listen.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

static void test_parse_listen_forms(void **state)
{
	listen_spec s;

	(void)state;
	assert_int_equal(listen_parse(&s, "X", "127.0.0.1:9464"), 0);
	assert_int_equal(s.kind, LISTEN_TCP);
	assert_string_equal(s.text, "127.0.0.1:9464");
	assert_true(listen_is_local(&s));
	assert_int_equal(listen_parse(&s, "X", "[::1]:80"), 0);
	assert_int_equal(s.kind, LISTEN_TCP);
	assert_string_equal(s.text, "[::1]:80");
	assert_true(listen_is_local(&s));
	assert_int_equal(listen_parse(&s, "X", "0.0.0.0:9464"), 0);
	assert_false(listen_is_local(&s));
	assert_int_equal(listen_parse(&s, "X", "[::]:9464"), 0);
	assert_false(listen_is_local(&s));
	assert_int_equal(listen_parse(&s, "X", "127.5.0.1:1"), 0);
	assert_true(listen_is_local(&s));
	assert_int_equal(listen_parse(&s, "X", "unix:/run/autopatch/admin.sock"), 0);
	assert_int_equal(s.kind, LISTEN_UNIX);
	assert_string_equal(s.path, "/run/autopatch/admin.sock");
	assert_int_equal(s.mode, 0600);
	assert_true(listen_is_local(&s));
	assert_int_equal(listen_parse(&s, "X", "off"), 0);
	assert_int_equal(s.kind, LISTEN_OFF);
	assert_false(listen_is_local(&s));
}

static void test_parse_listen_rejects(void **state)
{
	static const char *bad[] = {
	    "localhost:9464",
	    "127.0.0.1",
	    "127.0.0.1:",
	    "127.0.0.1:0",
	    "127.0.0.1:65536",
	    "127.0.0.1:12a",
	    ":9464",
	    "::1:9464",
	    "[::1]",
	    "[127.0.0.1]:80",
	    "[::1]9464",
	    "unix:",
	    "OFF",
	    "127.0.0.1:+80",
	    "1.2.3.4.5:80",
	    "[::1]:-1",
	    "127.0.0.1:9464 ",
	    "http://127.0.0.1:1",
	    "127.0.0.1:99999",
	};
	char longpath[200];
	listen_spec s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(listen_parse(&s, "AUTOPATCH_ADMIN_LISTEN", bad[i]), AP_EINVAL);
		assert_non_null(strstr(ap_error_last(), "AUTOPATCH_ADMIN_LISTEN"));
		assert_int_equal(s.kind, LISTEN_OFF);
	}
	snprintf(longpath, sizeof(longpath), "unix:/%0150d", 0);
	assert_int_equal(listen_parse(&s, "X", longpath), AP_EINVAL);
	assert_int_equal(listen_tcp(&s, "AUTOPATCH_BIND", "localhost", 80), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "AUTOPATCH_BIND"));
	assert_int_equal(listen_tcp(&s, "AUTOPATCH_BIND", "::", 3000), 0);
	assert_string_equal(s.text, "[::]:3000");
}

static void test_parse_mode(void **state)
{
	unsigned m = 0;

	(void)state;
	assert_int_equal(listen_parse_mode(&m, "M", "0600"), 0);
	assert_int_equal(m, 0600);
	assert_int_equal(listen_parse_mode(&m, "M", "660"), 0);
	assert_int_equal(m, 0660);
	assert_int_equal(listen_parse_mode(&m, "M", "0666"), AP_EINVAL);
	assert_int_equal(listen_parse_mode(&m, "M", "0700"), AP_EINVAL);
	assert_int_equal(listen_parse_mode(&m, "M", "rw"), AP_EINVAL);
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), rc;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	return rc == 0 ? 0 : errno;
}

static void test_unix_socket_mode_stale_and_in_use(void **state)
{
	char dir[] = "/tmp/ap-listen-XXXXXX", text[160], file[160];
	listen_spec s, other;
	struct stat st;
	int fd, fd2, stale;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(text, sizeof(text), "unix:%s/admin.sock", dir);
	assert_int_equal(listen_parse(&s, "X", text), 0);
	assert_int_equal(listen_open(&fd, &s, "fix it"), 0);
	assert_int_equal(lstat(s.path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(connect_unix(s.path), 0);

	/* A second server on the same path: refused, and the first one's file stays. */
	other = s;
	assert_int_equal(listen_open(&fd2, &other, "fix it"), AP_EIO);
	assert_int_equal(fd2, -1);
	assert_non_null(strstr(ap_error_last(), "another process"));
	assert_non_null(strstr(ap_error_last(), "fix it"));
	assert_int_equal(connect_unix(s.path), 0);

	/* The server died without removing its file: the next start replaces it. */
	close(fd);
	assert_int_equal(connect_unix(s.path), ECONNREFUSED);
	s.mode = 0660;
	assert_int_equal(listen_open(&fd, &s, "fix it"), 0);
	assert_int_equal(lstat(s.path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_int_equal(connect_unix(s.path), 0);
	close(fd);
	listen_remove(&s);
	assert_int_equal(lstat(s.path, &st), -1);

	/* A regular file in the way is never removed. */
	stale = open(s.path, O_CREAT | O_WRONLY, 0600);
	assert_true(stale >= 0);
	close(stale);
	assert_int_equal(listen_open(&fd, &s, "fix it"), AP_EIO);
	assert_non_null(strstr(ap_error_last(), "not a socket"));
	assert_int_equal(lstat(s.path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	unlink(s.path);

	/* A directory that does not exist. */
	snprintf(file, sizeof(file), "unix:%s/missing/admin.sock", dir);
	assert_int_equal(listen_parse(&s, "X", file), 0);
	assert_int_equal(listen_open(&fd, &s, "fix it"), AP_EIO);
	assert_non_null(strstr(ap_error_last(), "No such file or directory"));
	rmdir(dir);
}

static atomic_int cuts[2];

static void count_cut(enum dl_phase phase)
{
	cuts[phase == DL_BODY]++;
}

/* True when the peer of sv[1] sees end-of-file within ms. */
static bool peer_closed_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	if (poll(&p, 1, ms) != 1)
		return false;
	return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_deadline_cuts_expired_connections_only(void **state)
{
	int a[2], b[2], c[2];
	dl_tracker *t;
	dl_conn *ca, *cb, *cc;
	int64_t now = dl_now_ns();

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, c), 0);
	assert_int_equal(dl_new(&t, 10, count_cut), 0);
	ca = dl_track(t, a[0], DL_HEADERS, now + 50 * 1000000LL);
	cb = dl_track(t, b[0], DL_HEADERS, now + 50 * 1000000LL);
	cc = dl_track(t, c[0], DL_HEADERS, 0);
	assert_non_null(ca);
	assert_non_null(cb);
	assert_non_null(cc);
	assert_false(dl_enforce(t, ca, now));
	assert_false(dl_enforce(t, cc, now + 1000000000000LL));
	assert_false(dl_enforce(t, NULL, now));
	/* b finished its headers in time: its body gets a longer deadline; then it is done. */
	/* (b's body deadline is far enough past a's that a loaded machine, which may cut a
	 * late, still sees b open in between.) */
	dl_arm(cb, DL_BODY, now + 1500 * 1000000LL);
	assert_true(peer_closed_within(a[1], 2000));
	assert_false(peer_closed_within(b[1], 20));
	assert_true(peer_closed_within(b[1], 5000));
	assert_false(peer_closed_within(c[1], 200));
	assert_int_equal(cuts[0], 1);
	assert_int_equal(cuts[1], 1);
	/* The connection's own thread finds it expired too: counted once. */
	assert_true(dl_enforce(t, ca, dl_now_ns()));
	assert_int_equal(cuts[0], 1);
	/* Disarmed in time: never cut. */
	dl_arm(cc, DL_BODY, dl_now_ns() + 30 * 1000000LL);
	dl_arm(cc, DL_BODY, 0);
	assert_false(peer_closed_within(c[1], 100));
	/* Found by the connection's thread before the watcher looked: cut and counted once. */
	dl_arm(cc, DL_BODY, dl_now_ns() - 1);
	assert_true(dl_enforce(t, cc, dl_now_ns()));
	assert_true(peer_closed_within(c[1], 10));
	assert_int_equal(cuts[1], 2);
	dl_untrack(t, ca);
	dl_untrack(t, cb);
	dl_untrack(t, NULL);
	/* cc is freed with the tracker. */
	dl_free(t);
	dl_free(NULL);
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
		close(c[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_listen_forms),
	    cmocka_unit_test(test_parse_listen_rejects),
	    cmocka_unit_test(test_parse_mode),
	    cmocka_unit_test(test_unix_socket_mode_stale_and_in_use),
	    cmocka_unit_test(test_deadline_cuts_expired_connections_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
