/* SPDX-License-Identifier: MIT */
/* server/listen.h - the listening sockets of the HTTP listeners: a numeric TCP address and
 * port, or a unix socket path.
 *
 * autopatch opens these sockets itself (and hands them to libmicrohttpd) so that a failure
 * names its cause (address in use, directory missing, permission denied) in the one sentence
 * `serve` prints before exiting with code 2.
 */
#ifndef AP_LISTEN_H
#define AP_LISTEN_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

enum listen_kind {
	LISTEN_OFF,  /* no listener */
	LISTEN_TCP,  /* addr holds a numeric IPv4 or IPv6 address and a port */
	LISTEN_UNIX, /* path holds a unix socket path */
};

/* Permission bits a unix socket may get: the owner always reads and writes, the group may. */
#define LISTEN_MODE_DEFAULT 0600

typedef struct listen_spec {
	enum listen_kind kind;
	struct sockaddr_storage addr; /* LISTEN_TCP */
	socklen_t addr_len;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* LISTEN_UNIX, NUL-terminated */
	unsigned mode;	/* LISTEN_UNIX: the socket file's permission bits */
	char text[128]; /* "127.0.0.1:9464", "[::1]:9464", "unix:/run/x.sock" or "off" */
	dev_t dev;	/* LISTEN_UNIX, set by listen_open: the file it created */
	ino_t ino;
} listen_spec;

/* Parse a listener setting: "ADDRESS:PORT" (numeric IPv4, or [IPv6]:PORT), "unix:PATH" or
 * "off". name is the setting's name, used in the sentence of an AP_EINVAL. A unix socket gets
 * LISTEN_MODE_DEFAULT; change out->mode to widen it. */
int listen_parse(listen_spec *out, const char *name, const char *text);

/* A TCP spec from a numeric address and a port (AUTOPATCH_BIND and PORT). AP_EINVAL with a
 * sentence naming addr_setting when addr is not a numeric IPv4 or IPv6 address. */
int listen_tcp(listen_spec *out, const char *addr_setting, const char *addr, int port);

/* Parse a unix socket mode ("0600" or "0660": the owner reads and writes, the group may, no
 * one else). AP_EINVAL with a sentence naming the setting otherwise. */
int listen_parse_mode(unsigned *out, const char *name, const char *text);

/* True when a TCP spec's address is loopback (127.0.0.0/8, ::1) and for unix sockets. */
bool listen_is_local(const listen_spec *spec);

/* Create, bind and listen (non-blocking, close-on-exec, SO_REUSEADDR; IPv6 only for an IPv6
 * address). For a unix socket, a stale socket file (no process accepts on it) is replaced; a
 * live one or a file that is not a socket is an error; the file gets spec->mode before
 * listen(), so no client connects earlier, and spec->dev/ino record it for listen_remove().
 * On failure AP_EIO with "cannot listen on TEXT (cause): fix" and *fd is -1. */
int listen_open(int *fd, listen_spec *spec, const char *fix);

/* Remove the unix socket file listen_open created, if that file is still there. Other kinds:
 * nothing. Does not close any descriptor. */
void listen_remove(const listen_spec *spec);

#endif
