/* SPDX-License-Identifier: MIT */
/* sandbox/k8s_exec.h - one command over the Kubernetes streaming protocol: the pods/exec
 * subresource upgraded to a WebSocket (libwebsockets), subprotocol v5.channel.k8s.io or
 * v4.channel.k8s.io, and the channel demultiplexer that reads what comes back.
 *
 * Every WebSocket message carries one channel byte first: 0 stdin (client to server), 1
 * stdout, 2 stderr, 3 status (a v1 Status object once the command ended), 4 resize; v5 adds
 * 255 "close", whose second byte names the channel the sender will not write any more (the
 * client half-closes stdin with [255, 0]). The demultiplexer is fed whatever pieces of a
 * message arrive: it never trusts a length (WebSocket framing is libwebsockets' job), keeps at
 * most K8S_STATUS_CAP bytes of the status channel, and refuses an unknown channel.
 */
#ifndef AP_K8S_EXEC_H
#define AP_K8S_EXEC_H

#include "sandbox/k8s_api.h"
#include "sandbox/stream.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#define K8S_PROTO_V5	  "v5.channel.k8s.io"
#define K8S_PROTO_V4	  "v4.channel.k8s.io"
#define K8S_STATUS_CAP	  (64u << 10)
#define K8S_CHAN_STDIN	  0
#define K8S_CHAN_STDOUT	  1
#define K8S_CHAN_STDERR	  2
#define K8S_CHAN_STATUS	  3
#define K8S_CHAN_RESIZE	  4
#define K8S_CHAN_CLOSE	  255
#define K8S_EXEC_DIED	  1	       /* k8s_exec_run(): the alive check said the pod is gone */
#define K8S_EXEC_PATH_MAX (256u << 10) /* bytes of an exec's request path (with the command) */

typedef struct k8s_chan {
	bool v5;		     /* v5.channel.k8s.io: channel 255 is allowed */
	bool in_msg;		     /* inside a message whose channel byte was read */
	int channel;		     /* the current message's channel */
	bool failed;		     /* a protocol error was seen; further input is refused */
	char status[K8S_STATUS_CAP]; /* the status channel's bytes (not NUL-terminated) */
	size_t status_len;
	bool has_status; /* a status message arrived */
} k8s_chan;

/* Start a demultiplexer for a connection that speaks v5 (true) or v4. */
void k8s_chan_init(k8s_chan *d, bool v5);

/*
 * Feed n bytes of one WebSocket message (a piece of it; final: this piece ends it). Stdout and
 * stderr payload goes to fn (SBX_STREAM_STDOUT / SBX_STREAM_STDERR) as it arrives. Returns 0,
 * or AP_EIO with a sentence for: a message on stdin (0) or an unknown channel (resize and, on
 * v5, close are ignored), status past K8S_STATUS_CAP, a second status; after which every call
 * fails. An empty message is ignored.
 */
int k8s_chan_feed(k8s_chan *d, const void *p, size_t n, bool final, sbx_demux_fn fn, void *ud);

/*
 * The command's exit status from the status channel: "Success" is 0; "Failure" with reason
 * NonZeroExitCode and an ExitCode cause is that code (0..255). Anything else (no status, not
 * JSON, another failure) is AP_EIO with the Status message in the sentence.
 */
int k8s_chan_exit_code(const k8s_chan *d, int *code);

/* One exec. Strings are borrowed for the call. */
typedef struct k8s_exec_req {
	const char *path;	/* /api/v1/namespaces/NS/pods/NAME/exec?command=...&... */
	const char *protocols;	/* offered, in order: "v5.channel.k8s.io,v4.channel.k8s.io" */
	const void *stdin_data; /* written on channel 0 when not NULL, then half-closed (v5) */
	size_t stdin_len;
	/* Or, when stdin_data is NULL: stdin read from stdin_fn as it is sent (sbx_input_fn: up to
	 * n bytes, 0 at the end, < 0 to stop), then half-closed. v5 only: v4 cannot say EOF, so
	 * the caller must not use it on v4. */
	long (*stdin_fn)(void *ud, char *buf, size_t n);
	void *stdin_ud;
	long long deadline_ms;		     /* CLOCK_MONOTONIC ms: AP_ETIMEOUT after it */
	const volatile sig_atomic_t *cancel; /* AP_ECANCELLED when it becomes non-zero */
	sbx_demux_fn out_fn;		     /* stdout/stderr bytes */
	void (*idle_fn)(void *ud);	     /* nothing arrived for a while (about 50 ms) */
	bool (*alive_fn)(void *ud);	     /* every 2 s: false ends the exec with K8S_EXEC_DIED */
	void *ud;
} k8s_exec_req;

/*
 * Connect (TLS and credentials from ep), upgrade, stream, and read the exit status. 0 with
 * *code the exit status and proto (at least 24 bytes) the subprotocol the server chose;
 * K8S_EXEC_DIED; AP_ETIMEOUT; AP_ECANCELLED; AP_EIO for a protocol error or a connection that
 * closed without a status. A refused upgrade is AP_EUNAVAIL (no connection), AP_EDENIED (401,
 * 403), AP_ENOTFOUND (404) or AP_EHTTP, and *http_status (may be NULL) says the status.
 */
int k8s_exec_run(const k8s_endpoint *ep, const k8s_exec_req *r, int *code, char *proto,
		 long *http_status);

#endif
