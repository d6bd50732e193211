/* SPDX-License-Identifier: MIT */
/* tests/common/test_httpc.c - the capped body sink and header collector, called directly
 * and through a real libcurl transfer of a local file (no network). */
#include "common/buf.h"
#include "common/err.h"
#include "common/httpc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static size_t feed(httpc_body *b, const char *s)
{
	char tmp[256];
	size_t n = strlen(s);

	memcpy(tmp, s, n); /* libcurl hands a writable buffer */
	return httpc_on_body(tmp, 1, n, b);
}

static void test_body_sink_caps_and_aborts(void **state)
{
	ap_buf buf = AP_BUF_INIT(10);
	httpc_body b = HTTPC_BODY_INIT(&buf);

	(void)state;
	assert_int_equal(feed(&b, "012345"), 6);
	assert_int_equal(b.rc, 0);
	assert_int_equal(feed(&b, "6789"), 4); /* exactly the cap */
	assert_int_equal(feed(&b, "X"), 0);    /* one byte over: abort */
	assert_int_equal(b.rc, AP_ETOOBIG);
	assert_string_equal(ap_buf_str(&buf), "0123456789");
	assert_int_equal(feed(&b, "Y"), 0); /* stays aborted */
	ap_buf_release(&buf);
}

static void test_body_sink_without_buffer_discards(void **state)
{
	httpc_body b = HTTPC_BODY_INIT(NULL);

	(void)state;
	assert_int_equal(feed(&b, "anything at all"), 15);
	assert_int_equal(b.rc, 0);
}

static size_t feed_header(httpc_headers *h, const char *line)
{
	char tmp[512];
	size_t n = strlen(line);

	memcpy(tmp, line, n);
	return httpc_on_header(tmp, 1, n, h);
}

static void test_headers_keep_first_trimmed_capped_value(void **state)
{
	static const char *const names[] = {"retry-after", "Link", "x-ratelimit-remaining"};
	httpc_headers h;

	(void)state;
	httpc_headers_init(&h, names, 3, 8);
	assert_int_equal(feed_header(&h, "HTTP/1.1 403 Forbidden\r\n"), 24);
	feed_header(&h, "Retry-After: \t 120 \r\n");
	feed_header(&h, "link: <https://api.example/next>\r\n");
	feed_header(&h, "retry-after: 5\r\n"); /* a repeat: the first one counts */
	feed_header(&h, "X-Other: 1\r\n");
	feed_header(&h, "no colon here\r\n");
	feed_header(&h, "\r\n");
	assert_string_equal(httpc_header(&h, "RETRY-AFTER"), "120");
	assert_string_equal(httpc_header(&h, "link"), "<https:/"); /* cut at 8 bytes */
	assert_null(httpc_header(&h, "x-ratelimit-remaining"));
	assert_null(httpc_header(&h, "x-other")); /* not asked for */
	/* A new status line (redirect, 100 Continue) starts over. */
	feed_header(&h, "HTTP/2 200\r\n");
	assert_null(httpc_header(&h, "retry-after"));
	feed_header(&h, "x-ratelimit-remaining: 0\r\n");
	assert_string_equal(httpc_header(&h, "x-ratelimit-remaining"), "0");
	httpc_headers_clear(&h);
	assert_null(httpc_header(&h, "x-ratelimit-remaining"));
	httpc_headers_clear(NULL);
}

/* Through libcurl: a file:// transfer over the cap fails with CURLE_WRITE_ERROR and the sink
 * says AP_ETOOBIG; under the cap the whole body arrives. */
static void test_retry_after_seconds(void **state)
{
	long long s = -1;

	(void)state;
	assert_true(httpc_retry_after_seconds("7", &s));
	assert_int_equal(s, 7);
	assert_true(httpc_retry_after_seconds("0 ", &s));
	assert_int_equal(s, 0);
	assert_true(httpc_retry_after_seconds("99999999999999999999999", &s)); /* overflow */
	assert_int_equal(s, HTTPC_RETRY_AFTER_MAX);
	assert_false(httpc_retry_after_seconds(NULL, &s));
	assert_false(httpc_retry_after_seconds("", &s));
	assert_false(httpc_retry_after_seconds("-3", &s));
	assert_false(httpc_retry_after_seconds("5s", &s));
	assert_false(httpc_retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", &s));
}

static void test_real_transfer_stops_at_the_cap(void **state)
{
	char path[] = "/tmp/ap-test-httpc-XXXXXX", url[64], block[4096];
	ap_buf small = AP_BUF_INIT(1000), whole = AP_BUF_INIT(1 << 20);
	httpc_body b;
	FILE *f;
	CURL *h;
	int fd;

	(void)state;
	assert_int_equal(httpc_global_init(), 0);
	assert_int_equal(httpc_global_init(), 0); /* once per process; later calls agree */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	memset(block, 'b', sizeof(block));
	for (int i = 0; i < 16; i++)
		assert_int_equal(fwrite(block, 1, sizeof(block), f), sizeof(block));
	assert_int_equal(fclose(f), 0);
	snprintf(url, sizeof(url), "file://%s", path);

	h = curl_easy_init();
	assert_non_null(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	b = (httpc_body)HTTPC_BODY_INIT(&small);
	httpc_body_sink(h, &b);
	assert_int_equal(curl_easy_perform(h), CURLE_WRITE_ERROR);
	assert_int_equal(b.rc, AP_ETOOBIG);
	assert_true(small.len <= 1000);

	b = (httpc_body)HTTPC_BODY_INIT(&whole);
	httpc_body_sink(h, &b);
	assert_int_equal(curl_easy_perform(h), CURLE_OK);
	assert_int_equal(b.rc, 0);
	assert_int_equal(whole.len, 16 * sizeof(block));
	curl_easy_cleanup(h);
	unlink(path);
	ap_buf_release(&small);
	ap_buf_release(&whole);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_body_sink_caps_and_aborts),
	    cmocka_unit_test(test_body_sink_without_buffer_discards),
	    cmocka_unit_test(test_headers_keep_first_trimmed_capped_value),
	    cmocka_unit_test(test_retry_after_seconds),
	    cmocka_unit_test(test_real_transfer_stops_at_the_cap),
	};
	return cmocka_run_group_tests_name("httpc", tests, NULL, NULL);
}
