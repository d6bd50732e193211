/* SPDX-License-Identifier: MIT */
/* sandbox/stream.h - reading a command's output safely: the Docker multiplexed-stream
 * demultiplexer and the head+tail capped capture.
 *
 * The demultiplexer is a state machine fed with whatever bytes arrive, split anywhere. It never
 * trusts a frame length: the 32-bit size only says how many of the following bytes belong to
 * the frame, payload is handed on as it arrives, and nothing is ever allocated by it. A frame
 * header with an unknown stream byte or non-zero padding is a protocol error.
 *
 * The capture keeps at most `cap` bytes of a stream however much arrives: the first cap/2 and
 * the last cap - cap/2, with a one-line marker in the middle saying how much was dropped.
 */
#ifndef AP_SANDBOX_STREAM_H
#define AP_SANDBOX_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { SBX_STREAM_STDOUT = 1, SBX_STREAM_STDERR = 2 };

/* Receives payload bytes of one stream (SBX_STREAM_STDOUT or SBX_STREAM_STDERR). */
typedef void (*sbx_demux_fn)(void *ud, int stream, const char *p, size_t n);

typedef struct sbx_demux {
	unsigned char hdr[8]; /* header bytes collected so far */
	size_t hdr_fill;      /* how many of hdr are valid */
	uint64_t remaining;   /* payload bytes still owed by the current frame */
	int stream;	      /* stream of the current frame */
	bool failed;	      /* a protocol error was seen; further input is refused */
} sbx_demux;

#define SBX_DEMUX_INIT                                                                             \
	{                                                                                          \
		{0}, 0, 0, 0, false                                                                \
	}

/* Feed n bytes. Calls fn for every payload piece, in order. Returns 0, or AP_EIO with a
 * sentence on a malformed header (after which every call fails). Stream 0 (stdin echoed on
 * stdout, per the protocol) is reported as stdout. */
int sbx_demux_feed(sbx_demux *d, const void *p, size_t n, sbx_demux_fn fn, void *ud);

/* True when the input so far ended exactly at a frame boundary. */
bool sbx_demux_at_boundary(const sbx_demux *d);

typedef struct sbx_capture {
	size_t cap; /* bytes kept at most (head + tail) */
	char *head; /* first min(total, cap/2) bytes */
	size_t head_len;
	char *ring;	 /* the bytes after the head; a ring once more than cap arrived */
	size_t ring_cap; /* cap - cap/2 */
	size_t ring_len; /* valid bytes in ring */
	size_t ring_pos; /* next write position */
	uint64_t total;	 /* bytes seen */
	bool nomem;	 /* an allocation failed: bytes were dropped */
} sbx_capture;

#define SBX_CAPTURE_INIT(capbytes)                                                                 \
	{                                                                                          \
		(capbytes), NULL, 0, NULL, 0, 0, 0, 0, false                                       \
	}

/* Add bytes. Never fails: memory is bounded by cap, and on allocation failure bytes are
 * dropped (nomem is set and the result reports truncation). */
void sbx_capture_add(sbx_capture *c, const char *p, size_t n);

/* Whether more than cap bytes arrived (or bytes were dropped). */
bool sbx_capture_truncated(const sbx_capture *c);

/* The kept bytes as one NUL-terminated allocation (caller frees): everything when it fit, else
 * head + "\n[... N bytes dropped ...]\n" + tail. *len excludes the NUL. NULL on ENOMEM. */
char *sbx_capture_take(sbx_capture *c, size_t *len);

/* Free the buffers; the capture may be reused after re-initialising. Accepts NULL. */
void sbx_capture_release(sbx_capture *c);

#endif
