/* SPDX-License-Identifier: MIT */
/* tests/job/test_tester_box.c - the parts of job/tester_box.c that need no box: which settings
 * start spares, that a bad one only turns them off, that stopping is safe on any tester_boxes,
 * and the job's "Tester boxes" line. Spares made, taken, replaced and destroyed with real
 * Docker boxes: tests/e2e/test_tester_spares.py. */
#include "common/config.h"
#include "common/err.h"
#include "common/log.h"
#include "job/tester_box.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* A tester_boxes started with AUTOPATCH_TESTER_SPARES = value (NULL: no config at all). */
static void start_with(tester_boxes *tb, const char *value)
{
	ap_config *cfg = NULL;

	*tb = (tester_boxes)TESTER_BOXES_INIT;
	if (!value) {
		tester_boxes_start(tb, NULL);
		return;
	}
	assert_int_equal(cfg_new_empty(&cfg), 0);
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_TESTER_SPARES", value), 0);
	tester_boxes_start(tb, cfg);
	cfg_free(cfg);
}

static void test_no_spares_without_config_or_with_zero(void **state)
{
	tester_boxes tb;

	(void)state;
	start_with(&tb, NULL);
	assert_null(tb.sp);
	start_with(&tb, "0");
	assert_null(tb.sp); /* every box made on demand, no thread */
	tester_boxes_stop(&tb);
	assert_null(tb.sp);
}

static void test_a_bad_setting_turns_spares_off_and_says_so(void **state)
{
	static const char *const bad[] = {"5", "-1", "two", "99999999999"};
	char path[] = "/tmp/ap-tester-box-log-XXXXXX";
	char buf[4096];
	tester_boxes tb;
	ssize_t n;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	ap_log_set_fd(fd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		start_with(&tb, bad[i]);
		assert_null(tb.sp); /* the job goes on, making its boxes on demand */
	}
	ap_log_set_fd(2);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "AUTOPATCH_TESTER_SPARES"));
	assert_non_null(strstr(buf, "tester spares: none are made"));
}

static void test_stop_is_safe_on_any_tester_boxes(void **state)
{
	tester_boxes tb;

	(void)state;
	memset(&tb, 0, sizeof(tb));
	tester_boxes_stop(&tb); /* never started (a job that failed in setup) */
	tester_boxes_stop(&tb); /* twice: the release path after the fixer's */
	tester_boxes_stop(NULL);
	assert_null(tb.sp);
}

static void test_the_jobs_line(void **state)
{
	tester_boxes tb = TESTER_BOXES_INIT;
	char line[160];

	(void)state;
	tb.made = 4;
	tb.warm = 3;
	tb.dropped = 2;
	tester_boxes_describe(&tb, line, sizeof(line));
	assert_string_equal(line, "Tester boxes: 4 fresh boxes for 4 runs, 3 of them made ahead of "
				  "time; 2 spares destroyed unused");
	tb.made = 1;
	tb.warm = 0;
	tb.dropped = 1;
	tester_boxes_describe(&tb, line, sizeof(line));
	assert_string_equal(line, "Tester boxes: 1 fresh box for 1 run, 0 of them made ahead of "
				  "time; 1 spare destroyed unused");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_spares_without_config_or_with_zero),
	    cmocka_unit_test(test_a_bad_setting_turns_spares_off_and_says_so),
	    cmocka_unit_test(test_stop_is_safe_on_any_tester_boxes),
	    cmocka_unit_test(test_the_jobs_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
