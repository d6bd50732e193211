/* SPDX-License-Identifier: MIT */
/* server/listen.c - listening sockets for the HTTP listeners (see listen.h). */
#include "server/listen.h"

#include "common/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Port from decimal digits only, 1 to 65535; -1 otherwise. */
static int parse_port(const char *s)
{
	long n = 0;

	if (!*s || strlen(s) > 5)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n >= 1 && n <= 65535 ? (int)n : -1;
}

/* Fill a TCP spec from a numeric address; false when addr is not one. The text fits: a
 * numeric address is under INET6_ADDRSTRLEN (46) bytes, the port 5 digits. */
static bool set_tcp(listen_spec *out, const char *addr, int port)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)&out->addr;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&out->addr;

	memset(out, 0, sizeof(*out));
	out->kind = LISTEN_TCP;
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		out->addr_len = sizeof(*a4);
		snprintf(out->text, sizeof(out->text), "%s:%d", addr, port);
		return true;
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		out->addr_len = sizeof(*a6);
		snprintf(out->text, sizeof(out->text), "[%s]:%d", addr, port);
		return true;
	}
	return false;
}

/* Clear *out and fail with "NAME="value" is not WHAT". */
static int refuse(listen_spec *out, const char *name, const char *value, const char *what)
{
	memset(out, 0, sizeof(*out));
	return ap_error_set(AP_EINVAL, "%s=\"%.80s\" is not %s", name, value, what);
}

int listen_tcp(listen_spec *out, const char *addr_setting, const char *addr, int port)
{
	if (strlen(addr) < INET6_ADDRSTRLEN && set_tcp(out, addr, port))
		return 0;
	return refuse(out, addr_setting, addr,
		      "a numeric IP address: use e.g. 0.0.0.0 or 127.0.0.1");
}

int listen_parse(listen_spec *out, const char *name, const char *text)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon;
	size_t hlen;
	int port;

	memset(out, 0, sizeof(*out));
	if (strcmp(text, "off") == 0) {
		snprintf(out->text, sizeof(out->text), "off");
		return 0;
	}
	if (strncmp(text, "unix:", 5) == 0) {
		size_t n = strlen(text + 5);

		if (n == 0 || n >= sizeof(out->path) || n + 5 >= sizeof(out->text))
			return ap_error_set(AP_EINVAL,
					    "%s=\"%.80s\": a unix socket path must be 1 to %zu "
					    "bytes long, e.g. unix:/run/autopatch/admin.sock",
					    name, text, sizeof(out->path) - 1);
		out->kind = LISTEN_UNIX;
		memcpy(out->path, text + 5, n + 1);
		out->mode = LISTEN_MODE_DEFAULT;
		snprintf(out->text, sizeof(out->text), "%s", text);
		return 0;
	}
	colon = strrchr(text, ':');
	if (!colon)
		goto bad;
	hlen = (size_t)(colon - text);
	if (text[0] == '[') {
		if (hlen < 3 || text[hlen - 1] != ']' || hlen - 2 >= sizeof(host))
			goto bad;
		memcpy(host, text + 1, hlen - 2);
		host[hlen - 2] = '\0';
		if (!strchr(host, ':'))
			goto bad; /* [1.2.3.4]:80 */
	} else {
		if (hlen == 0 || hlen >= sizeof(host))
			goto bad;
		memcpy(host, text, hlen);
		host[hlen] = '\0';
		if (strchr(host, ':'))
			goto bad; /* an IPv6 address needs brackets */
	}
	port = parse_port(colon + 1);
	if (port < 0 || !set_tcp(out, host, port))
		goto bad;
	return 0;
bad:
	return refuse(out, name, text,
		      "ADDRESS:PORT (numeric), unix:PATH or off: use e.g. 127.0.0.1:9464, "
		      "[::1]:9464 or unix:/run/autopatch/admin.sock");
}

int listen_parse_mode(unsigned *out, const char *name, const char *text)
{
	if (strcmp(text, "0600") == 0 || strcmp(text, "600") == 0) {
		*out = 0600;
		return 0;
	}
	if (strcmp(text, "0660") == 0 || strcmp(text, "660") == 0) {
		*out = 0660;
		return 0;
	}
	return ap_error_set(AP_EINVAL,
			    "%s=\"%.20s\" is not a socket mode autopatch uses: set 0600 (the "
			    "server's user only) or 0660 (and its group)",
			    name, text);
}

bool listen_is_local(const listen_spec *spec)
{
	if (spec->kind == LISTEN_UNIX)
		return true;
	if (spec->kind != LISTEN_TCP)
		return false;
	if (spec->addr.ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)&spec->addr)->sin_addr.s_addr) >> 24) ==
		       127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&spec->addr)->sin6_addr);
}

static int fail(int fd, const listen_spec *spec, const char *cause, const char *fix)
{
	if (fd >= 0)
		close(fd);
	return ap_error_set(AP_EIO, "cannot listen on %s (%s): %s", spec->text, cause, fix);
}

/* A file at path that is a unix socket nobody accepts on is left over from a server that
 * died: remove it. Anything else at path is an error. */
static int clear_stale(const listen_spec *spec, const char *fix)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int probe, rc;

	if (lstat(spec->path, &st) != 0)
		return errno == ENOENT ? 0 : fail(-1, spec, strerror(errno), fix);
	if (!S_ISSOCK(st.st_mode))
		return fail(-1, spec, "a file that is not a socket is in the way", fix);
	memcpy(sun.sun_path, spec->path, strlen(spec->path) + 1);
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return fail(-1, spec, strerror(errno), fix);
	rc = connect(probe, (struct sockaddr *)&sun, sizeof(sun));
	close(probe);
	if (rc == 0)
		return fail(-1, spec, "another process accepts connections on it", fix);
	if (errno != ECONNREFUSED)
		return fail(-1, spec, strerror(errno), fix);
	if (unlink(spec->path) != 0 && errno != ENOENT)
		return fail(-1, spec, strerror(errno), fix);
	return 0;
}

static int open_unix(int *out, listen_spec *spec, const char *fix)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc;

	if ((rc = clear_stale(spec, fix)))
		return rc;
	memcpy(sun.sun_path, spec->path, strlen(spec->path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(-1, spec, strerror(errno), fix);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)
		return fail(fd, spec, strerror(errno), fix);
	/* Before listen(): until then a connect() is refused, so the mode applies to everyone. */
	if (chmod(spec->path, spec->mode) != 0 || lstat(spec->path, &st) != 0 ||
	    !S_ISSOCK(st.st_mode) || (st.st_mode & 0777) != spec->mode) {
		rc = fail(fd, spec, "cannot set the socket file's mode", fix);
		unlink(spec->path);
		return rc;
	}
	spec->dev = st.st_dev;
	spec->ino = st.st_ino;
	if (listen(fd, SOMAXCONN) != 0) {
		rc = fail(fd, spec, strerror(errno), fix);
		listen_remove(spec);
		return rc;
	}
	*out = fd;
	return 0;
}

static int open_tcp(int *out, const listen_spec *spec, const char *fix)
{
	int fd, on = 1;

	fd = socket(spec->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(-1, spec, strerror(errno), fix);
	/* SO_REUSEADDR lets a restart bind while old connections linger in TIME_WAIT; a port
	 * another process listens on still fails (no SO_REUSEPORT). */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
	    (spec->addr.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) != 0))
		return fail(fd, spec, strerror(errno), fix);
	if (bind(fd, (const struct sockaddr *)&spec->addr, spec->addr_len) != 0 ||
	    listen(fd, SOMAXCONN) != 0)
		return fail(fd, spec, strerror(errno), fix);
	*out = fd;
	return 0;
}

int listen_open(int *fd, listen_spec *spec, const char *fix)
{
	*fd = -1;
	switch (spec->kind) {
	case LISTEN_TCP:
		return open_tcp(fd, spec, fix);
	case LISTEN_UNIX:
		return open_unix(fd, spec, fix);
	default:
		return ap_error_set(AP_EINVAL, "listener %s has nothing to open", spec->text);
	}
}

void listen_remove(const listen_spec *spec)
{
	struct stat st;

	if (spec->kind != LISTEN_UNIX || !spec->ino)
		return;
	if (lstat(spec->path, &st) == 0 && st.st_dev == spec->dev && st.st_ino == spec->ino)
		unlink(spec->path);
}
