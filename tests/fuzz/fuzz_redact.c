/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_redact.c - the redaction layer on arbitrary bytes written in arbitrary
 * pieces: the stream's output must equal redact_mem() of the whole input (the contract in
 * redact.h; inputs holding an AWS keyword are exempt, where the stream may mask more), no
 * registered secret may come out in plain, and the output is never longer than the input. */
#include "common/buf.h"
#include "common/redact.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const fuzz_secrets[] = {
    "fuzz-secret-value",
    "p@ss/w0rd+x=y",
    "line-one-abc\nline-two-def\n",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	for (size_t i = 0; i < sizeof(fuzz_secrets) / sizeof(fuzz_secrets[0]); i++)
		if (redact_add_secret(fuzz_secrets[i]))
			abort();
	return 0;
}

static void collect(void *ud, const char *p, size_t n)
{
	if (ap_buf_add(ud, p, n))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ap_buf out = AP_BUF_INIT((size_t)-2), whole = AP_BUF_INIT((size_t)-2);
	const char *text = (const char *)data + 2;
	size_t len, off = 0, k = 0;
	redact_stream *s;

	if (size < 2)
		return 0;
	len = size - 2;
	/* Byte 0 picks the batch, byte 1 the rhythm of piece sizes. */
	if (redact_stream_new(&s, collect, &out))
		abort();
	redact_stream_set_batch(s, data[0] & 1 ? 0 : data[0] >> 1);
	while (off < len) {
		size_t n = 1 + (size_t)(data[1] + 7 * k++) % 23;

		if (n > len - off)
			n = len - off;
		if (redact_stream_write(s, text + off, n))
			abort();
		off += n;
	}
	if (redact_stream_flush(s))
		abort();
	redact_stream_free(s);
	if (redact_append(&whole, text, len))
		abort();
	if (whole.len > len || out.len > len)
		abort();
	if (!memmem(text, len, "AKIA", 4) && !memmem(text, len, "ASIA", 4) &&
	    !memmem(text, len, "ABIA", 4) && !memmem(text, len, "ACCA", 4) &&
	    (out.len != whole.len || (out.len && memcmp(out.data, whole.data, out.len) != 0)))
		abort();
	for (size_t i = 0; i < 2; i++)
		if (out.len && memmem(out.data, out.len, fuzz_secrets[i], strlen(fuzz_secrets[i])))
			abort();
	ap_buf_release(&out);
	ap_buf_release(&whole);
	return 0;
}
