/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_demux.c - the Docker stream demultiplexer and the head+tail capture on
 * arbitrary bytes, split at arbitrary points: no crash, no allocation by a frame length, no
 * more payload out than bytes in, and a capture that never grows past its cap. */
#include "sandbox/stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct sink {
	sbx_capture out, err;
	size_t bytes;
};

static void on_payload(void *ud, int stream, const char *p, size_t n)
{
	struct sink *s = ud;

	if (stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR)
		abort();
	s->bytes += n;
	sbx_capture_add(stream == SBX_STREAM_STDERR ? &s->err : &s->out, p, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sink s = {SBX_CAPTURE_INIT(64), SBX_CAPTURE_INIT(7), 0};
	sbx_demux d = SBX_DEMUX_INIT;
	size_t off = 0, step, len;
	char *out;

	/* The first byte picks the piece size, so headers and payloads split everywhere. */
	step = size ? (size_t)(data[0] % 13) + 1 : 1;
	while (off < size) {
		size_t n = size - off < step ? size - off : step;

		if (sbx_demux_feed(&d, data + off, n, on_payload, &s))
			break;
		off += n;
	}
	if (s.bytes > size)
		abort();
	out = sbx_capture_take(&s.out, &len);
	if (!out || len > 64 + 64 || s.out.head_len > 32 || s.out.ring_len > 32)
		abort();
	free(out);
	out = sbx_capture_take(&s.err, &len);
	if (!out || len > 7 + 64)
		abort();
	free(out);
	sbx_capture_release(&s.out);
	sbx_capture_release(&s.err);
	return 0;
}
