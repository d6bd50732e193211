/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_stream.c - the frame demultiplexer and the head+tail capture. */
#include "common/err.h"
#include "sandbox/stream.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Collects demultiplexed payload per stream, and counts callback calls. */
struct got {
	char out[4096];
	size_t out_len;
	char err[4096];
	size_t err_len;
	size_t calls;
	size_t bytes;
};

static void collect(void *ud, int stream, const char *p, size_t n)
{
	struct got *g = ud;

	g->calls++;
	g->bytes += n;
	if (stream == SBX_STREAM_STDOUT && g->out_len + n <= sizeof(g->out)) {
		memcpy(g->out + g->out_len, p, n);
		g->out_len += n;
	} else if (stream == SBX_STREAM_STDERR && g->err_len + n <= sizeof(g->err)) {
		memcpy(g->err + g->err_len, p, n);
		g->err_len += n;
	}
}

static size_t frame(unsigned char *dst, int stream, const char *payload, uint32_t claimed, size_t n)
{
	dst[0] = (unsigned char)stream;
	dst[1] = dst[2] = dst[3] = 0;
	dst[4] = (unsigned char)(claimed >> 24);
	dst[5] = (unsigned char)(claimed >> 16);
	dst[6] = (unsigned char)(claimed >> 8);
	dst[7] = (unsigned char)claimed;
	memcpy(dst + 8, payload, n);
	return 8 + n;
}

static void test_demux_whole_frames(void **state)
{
	unsigned char buf[256];
	size_t n = 0;
	sbx_demux d = SBX_DEMUX_INIT;
	struct got g = {0};

	(void)state;
	n += frame(buf + n, 1, "hello ", 6, 6);
	n += frame(buf + n, 2, "oops", 4, 4);
	n += frame(buf + n, 1, "world", 5, 5);
	n += frame(buf + n, 0, "!", 1, 1); /* stream 0 is reported as stdout */
	assert_int_equal(sbx_demux_feed(&d, buf, n, collect, &g), 0);
	assert_int_equal(g.out_len, 12);
	assert_memory_equal(g.out, "hello world!", 12);
	assert_int_equal(g.err_len, 4);
	assert_memory_equal(g.err, "oops", 4);
	assert_true(sbx_demux_at_boundary(&d));
}

/* The same bytes fed one at a time and in every two-way split give the same result. */
static void test_demux_split_anywhere(void **state)
{
	unsigned char buf[256];
	size_t n = 0;

	(void)state;
	n += frame(buf + n, 1, "abc", 3, 3);
	n += frame(buf + n, 2, "de", 2, 2);
	n += frame(buf + n, 1, "", 0, 0);
	n += frame(buf + n, 1, "fgh", 3, 3);
	for (size_t cut = 0; cut <= n; cut++) {
		sbx_demux d = SBX_DEMUX_INIT;
		struct got g = {0};

		assert_int_equal(sbx_demux_feed(&d, buf, cut, collect, &g), 0);
		assert_int_equal(sbx_demux_feed(&d, buf + cut, n - cut, collect, &g), 0);
		assert_int_equal(g.out_len, 6);
		assert_memory_equal(g.out, "abcfgh", 6);
		assert_int_equal(g.err_len, 2);
		assert_true(sbx_demux_at_boundary(&d));
	}
	{
		sbx_demux d = SBX_DEMUX_INIT;
		struct got g = {0};

		for (size_t i = 0; i < n; i++) {
			assert_int_equal(sbx_demux_feed(&d, buf + i, 1, collect, &g), 0);
			if (i == 3 || i == 5) /* inside the first header */
				assert_false(sbx_demux_at_boundary(&d));
		}
		assert_memory_equal(g.out, "abcfgh", 6);
	}
}

/* A header claiming 4 GiB - 1 is not believed: only the bytes that arrive are handed on, and
 * nothing is allocated by the claim (this test would abort under ASan if it were). */
static void test_demux_forged_length(void **state)
{
	unsigned char buf[64];
	size_t n;
	sbx_demux d = SBX_DEMUX_INIT;
	struct got g = {0};

	(void)state;
	n = frame(buf, 1, "tiny", 0xFFFFFFFFu, 4);
	assert_int_equal(sbx_demux_feed(&d, buf, n, collect, &g), 0);
	assert_int_equal(g.out_len, 4);
	assert_int_equal(g.bytes, 4);
	assert_false(sbx_demux_at_boundary(&d)); /* the stream ended mid-frame: visible */
	assert_int_equal(d.remaining, 0xFFFFFFFFull - 4);
	/* What follows is still payload of that frame, even if it looks like a header. */
	n = frame(buf, 2, "x", 1, 1);
	assert_int_equal(sbx_demux_feed(&d, buf, n, collect, &g), 0);
	assert_int_equal(g.err_len, 0);
	assert_int_equal(g.out_len, 4 + 9);
}

static void test_demux_bad_stream_byte(void **state)
{
	unsigned char buf[64];
	size_t n;
	sbx_demux d = SBX_DEMUX_INIT;
	struct got g = {0};

	(void)state;
	n = frame(buf, 1, "ok", 2, 2);
	n += frame(buf + n, 3, "no", 2, 2);
	assert_int_equal(sbx_demux_feed(&d, buf, n, collect, &g), AP_EIO);
	assert_int_equal(g.out_len, 2);
	assert_int_equal(g.err_len, 0);
	assert_non_null(strstr(ap_error_last(), "malformed"));
	/* Once failed, always failed. */
	assert_int_equal(sbx_demux_feed(&d, buf, 10, collect, &g), AP_EIO);

	/* Non-zero padding bytes are refused too. */
	{
		sbx_demux d2 = SBX_DEMUX_INIT;
		unsigned char bad[8] = {1, 0, 1, 0, 0, 0, 0, 1};

		assert_int_equal(sbx_demux_feed(&d2, bad, 8, collect, &g), AP_EIO);
	}
}

static void test_capture_fits(void **state)
{
	sbx_capture c = SBX_CAPTURE_INIT(16);
	size_t len;
	char *s;

	(void)state;
	sbx_capture_add(&c, "0123456789", 10);
	sbx_capture_add(&c, "abcdef", 6);
	assert_false(sbx_capture_truncated(&c));
	s = sbx_capture_take(&c, &len);
	assert_int_equal(len, 16);
	assert_string_equal(s, "0123456789abcdef");
	free(s);
	sbx_capture_release(&c);
}

static void test_capture_keeps_head_and_tail(void **state)
{
	sbx_capture c = SBX_CAPTURE_INIT(10);
	char big[1000];
	size_t len;
	char *s;

	(void)state;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	/* In pieces of odd sizes so the ring wraps at every position. */
	for (size_t off = 0, step = 1; off < sizeof(big); off += step, step = step % 7 + 1)
		sbx_capture_add(&c, big + off, off + step > sizeof(big) ? sizeof(big) - off : step);
	assert_true(sbx_capture_truncated(&c));
	assert_int_equal(c.total, 1000);
	s = sbx_capture_take(&c, &len);
	assert_memory_equal(s, big, 5);
	assert_memory_equal(s + len - 5, big + 995, 5);
	assert_non_null(strstr(s, "[... 990 bytes dropped ...]"));
	assert_true(len < 10 + 40);
	free(s);
	sbx_capture_release(&c);
}

/* One huge piece: memory stays at the cap. */
static void test_capture_single_huge_piece(void **state)
{
	sbx_capture c = SBX_CAPTURE_INIT(8);
	size_t n = 1 << 20, len;
	char *big = malloc(n), *s;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', n);
	memcpy(big, "HEAD", 4);
	memcpy(big + n - 4, "TAIL", 4);
	sbx_capture_add(&c, big, n);
	s = sbx_capture_take(&c, &len);
	assert_memory_equal(s, "HEAD", 4);
	assert_memory_equal(s + len - 4, "TAIL", 4);
	assert_true(sbx_capture_truncated(&c));
	free(s);
	free(big);
	sbx_capture_release(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_demux_whole_frames),
	    cmocka_unit_test(test_demux_split_anywhere),
	    cmocka_unit_test(test_demux_forged_length),
	    cmocka_unit_test(test_demux_bad_stream_byte),
	    cmocka_unit_test(test_capture_fits),
	    cmocka_unit_test(test_capture_keeps_head_and_tail),
	    cmocka_unit_test(test_capture_single_huge_piece),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
