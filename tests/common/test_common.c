/* SPDX-License-Identifier: MIT */
/* tests/common/test_common.c - buffer caps, errors and configuration parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/err.h"
#include "common/jsonnum.h"

static void test_buf_cap_refuses_overflow(void **state)
{
	ap_buf b = AP_BUF_INIT(8);

	(void)state;
	assert_int_equal(ap_buf_adds(&b, "12345"), 0);
	assert_int_equal(ap_buf_adds(&b, "6789"), AP_ETOOBIG);
	assert_string_equal(ap_buf_str(&b), "12345");
	assert_int_equal(ap_buf_addf(&b, "%d", 678), 0);
	assert_string_equal(ap_buf_str(&b), "12345678");
	assert_int_equal(ap_buf_add(&b, "x", 1), AP_ETOOBIG);
	ap_buf_release(&b);
}

static void test_buf_take_transfers_ownership(void **state)
{
	ap_buf b = AP_BUF_INIT(64);
	char *s;

	(void)state;
	s = ap_buf_take(&b);
	assert_string_equal(s, "");
	free(s);
	ap_buf_addf(&b, "job %d", 7);
	s = ap_buf_take(&b);
	assert_string_equal(s, "job 7");
	assert_null(b.data);
	free(s);
}

static void test_config_env_file_and_overrides(void **state)
{
	char path[] = "/tmp/ap-cfg-XXXXXX";
	int fd = mkstemp(path);
	ap_config *c;
	int64_t n;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("# comment\nexport PORT=4000\nWEBHOOK_SECRET=\"a b\\nc\"\nAP_TEST_BARE=x # c\n"
	      "AP_TEST_OVERRIDE=file\n",
	      f);
	fclose(f);
	setenv("AP_TEST_OVERRIDE", "env", 1);
	assert_int_equal(cfg_load(&c, path), 0);
	assert_string_equal(cfg_get(c, "WEBHOOK_SECRET"), "a b\nc");
	assert_string_equal(cfg_get(c, "AP_TEST_BARE"), "x");
	assert_string_equal(cfg_get(c, "AP_TEST_OVERRIDE"), "env");
	assert_int_equal(cfg_get_int(c, "PORT", 3000, 1, 65535, &n), 0);
	assert_int_equal(n, 4000);
	cfg_set(c, "PORT", "80a");
	assert_int_equal(cfg_get_int(c, "PORT", 3000, 1, 65535, &n), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "PORT"));
	cfg_set(c, "SIZE", "2m");
	assert_int_equal(cfg_get_bytes(c, "SIZE", 0, 0, INT64_MAX, &n), 0);
	assert_int_equal(n, 2 << 20);
	cfg_free(c);
	unlink(path);
	unsetenv("AP_TEST_OVERRIDE");
}

static void test_config_malformed_line_names_line(void **state)
{
	char path[] = "/tmp/ap-cfg-XXXXXX";
	int fd = mkstemp(path);
	ap_config *c;

	(void)state;
	assert_int_equal(write(fd, "A=1\nnot a setting\n", 18), 18);
	close(fd);
	assert_int_equal(cfg_load(&c, path), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "line 2"));
	unlink(path);
}

static void test_json_int_refuses_what_int64_cannot_hold(void **state)
{
	cJSON *o = cJSON_Parse("{\"a\": 42, \"b\": 1e300, \"c\": 1.5, \"d\": -7, \"e\": \"9\","
			       "\"f\": 9007199254740993e3, \"g\": -1e19}");
	int64_t n = 5;

	(void)state;
	assert_non_null(o);
	assert_true(ap_json_int(cJSON_GetObjectItem(o, "a"), &n));
	assert_int_equal(n, 42);
	assert_true(ap_json_int(cJSON_GetObjectItem(o, "d"), &n));
	assert_int_equal(n, -7);
	n = 5;
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "b"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "c"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "e"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "f"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "g"), &n));
	assert_false(ap_json_int(NULL, &n));
	assert_int_equal(n, 5);
	assert_int_equal(ap_json_int_or(o, "b", -1), -1);
	assert_int_equal(ap_json_int_or(o, "missing", 3), 3);
	cJSON_Delete(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_cap_refuses_overflow),
	    cmocka_unit_test(test_buf_take_transfers_ownership),
	    cmocka_unit_test(test_config_env_file_and_overrides),
	    cmocka_unit_test(test_config_malformed_line_names_line),
	    cmocka_unit_test(test_json_int_refuses_what_int64_cannot_hold),
	};
	return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
