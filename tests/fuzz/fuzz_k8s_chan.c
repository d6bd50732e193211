/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_k8s_chan.c - the Kubernetes exec channel demultiplexer and the Status
 * reader on arbitrary WebSocket messages, each split into arbitrary pieces: no crash, no more
 * payload out than bytes in, the status never past its cap, an exit code within 0..255. */
#include "sandbox/k8s_exec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t out_bytes;

static void on_payload(void *ud, int stream, const char *p, size_t n)
{
	(void)ud;
	(void)p;
	if (stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR)
		abort();
	out_bytes += n;
}

/* Input: byte 0 = v5 (odd) or v4, byte 1 = piece size; then messages, each a 16-bit length
 * (little endian) followed by that many bytes (cut short at the end of the input). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static k8s_chan d;
	size_t off = 2, step;
	int code = -1;

	if (size < 2)
		return 0;
	k8s_chan_init(&d, data[0] & 1);
	step = (size_t)(data[1] % 17) + 1;
	out_bytes = 0;
	while (off + 2 <= size) {
		size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8, done = 0;

		off += 2;
		if (len > size - off)
			len = size - off;
		do {
			size_t n = len - done < step ? len - done : step;

			if (k8s_chan_feed(&d, data + off + done, n, done + n == len, on_payload,
					  NULL))
				goto out;
			done += n;
		} while (done < len);
		off += len;
	}
out:
	if (out_bytes > size || d.status_len > K8S_STATUS_CAP)
		abort();
	if (k8s_chan_exit_code(&d, &code) == 0 && (code < 0 || code > 255))
		abort();
	return 0;
}
