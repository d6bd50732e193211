/* SPDX-License-Identifier: MIT */
/* tests/agents/test_report_memory.c - what a report of REPORT_MAX_TESTS test cases costs (issue
 * 26: one took `autopatch serve` to 591 MiB). It does what the Tester does with a suite of a
 * million tests on the pristine and on the patched code: the raw JUnit XML of one run (about
 * 61 MiB, under REPORT_READ_CAP) parsed, finished and written to the trajectory, kept while the
 * second run is read the same way, then the two compared (tester_regressions); once as it is,
 * once with the second report sharing the first one's ids (report_share_ids). The peak
 * resident memory each adds must stay under MEMORY_BOUND (the figures are printed; see
 * bench/report-memory/README.md). Each runs in a child process of its own, so that nothing
 * else has raised the high-water mark it reads. Under a sanitizer the bound means nothing: a
 * smaller suite runs the same steps there. */
#include "agents/report.h"
#include "agents/tester.h"
#include "agents/traj.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define SANITIZED 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define SANITIZED 1
#endif
#endif

#define MEMORY_BOUND (256u << 20) /* generous: measured 176 and 145 MiB, 704 before */
#define REGRESSIONS  10

/* In the child: no cmocka (its failures jump back into the test runner). */
#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);      \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

static long resident_kib(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	CHECK(f);
	CHECK(fscanf(f, "%ld %ld", &pages, &res) == 2);
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long peak_kib(void)
{
	struct rusage u;

	CHECK(getrusage(RUSAGE_SELF, &u) == 0);
	return u.ru_maxrss;
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* JUnit XML of n test cases, 64 bytes each; one in a thousand fails with a message, and on the
 * patched side (regress) REGRESSIONS more do. malloc'd, as the box's output is. */
static char *suite(size_t n, bool regress, size_t *len)
{
	size_t cap = n * 64 + (n / 1000 + REGRESSIONS) * 160 + 256, l = 0;
	char *x = malloc(cap);

	CHECK(x);
	l += (size_t)sprintf(x, "<?xml version=\"1.0\"?>\n<testsuite name=\"pytest\">\n");
	for (size_t i = 0; i < n; i++) {
		bool fails =
		    i % 1000 == 7 || (regress && i % 1000 == 500 && i / 1000 < REGRESSIONS);

		if (fails)
			l += (size_t)sprintf(x + l,
					     "<testcase classname=\"tests.test_m%03zu\" "
					     "name=\"test_case_%06zu\"><failure message=\"assert "
					     "1 == 2\">def test(): assert 1 == 2\nE assert 1 == 2"
					     "</failure></testcase>\n",
					     i % 1000, i % 1000000);
		else
			l += (size_t)sprintf(x + l,
					     "<testcase classname=\"tests.test_m%03zu\" "
					     "name=\"test_case_%06zu\"/>\n",
					     i % 1000, i % 1000000);
	}
	l += (size_t)sprintf(x + l, "</testsuite>\n");
	CHECK(l < cap);
	*len = l;
	return x;
}

/* One run as the Tester reads it back: raw text, parse, finish, trajectory, raw text freed. */
static void one_run(report *r, traj *tj, size_t n, bool regress, const char *dir, long base)
{
	size_t len;
	double t0;
	char *raw = suite(n, regress, &len);

	t0 = seconds();
	CHECK(report_parse_junit(r, raw, len) == 0);
	free(raw);
	report_finish(r);
	report_traj_tests(tj, dir, r);
	CHECK(r->n == n);
	printf("  %s: %zu tests, %.1f MiB of JUnit XML read in %.2f s; peak so far +%ld MiB\n", dir,
	       n, (double)len / 1048576.0, seconds() - t0, (peak_kib() - base) / 1024);
}

/* The two runs and their comparison; the peak resident memory they added, in KiB. */
static long two_runs(size_t n, bool share)
{
	report before = REPORT_INIT, after = REPORT_INIT;
	traj *tj = NULL;
	size_t count = 0;
	char *reg;
	long base = resident_kib(), peak;

	CHECK(traj_open(&tj, "/dev/null") == 0);
	one_run(&before, tj, n, false, "/tmp/trees/pristine", base);
	if (share)
		report_share_ids(&after, &before);
	one_run(&after, tj, n, true, "/tmp/trees/patched", base);
	reg = tester_regressions(&before, &after, 30, &count);
	CHECK(count == REGRESSIONS && reg);
	free(reg);
	peak = peak_kib() - base;
	report_release(&after);
	report_release(&before);
	traj_free(tj);
	printf("  two reports compared: peak +%ld MiB; after report_release(): resident +%ld "
	       "MiB\n",
	       peak / 1024, (resident_kib() - base) / 1024);
	return peak;
}

/* two_runs() in a child process: its peak in KiB. */
static long in_child(size_t n, bool share)
{
	int fds[2], status = 0;
	long peak = -1;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	fflush(stdout);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		peak = two_runs(n, share);
		fflush(stdout);
		CHECK(write(fds[1], &peak, sizeof(peak)) == (ssize_t)sizeof(peak));
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &peak, sizeof(peak)), sizeof(peak));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return peak;
}

static void test_two_runs_of_a_million_tests(void **state)
{
	(void)state;
#ifdef SANITIZED
	size_t n = 20000;
#else
	size_t n = REPORT_MAX_TESTS;
#endif

	for (int share = 0; share < 2; share++) {
		long peak;

		printf("%zu tests twice%s:\n", n, share ? ", the second run sharing ids" : "");
		peak = in_child(n, share);
#ifndef SANITIZED
		printf("  bound %u MiB\n", MEMORY_BOUND >> 20);
		assert_true((unsigned long)peak * 1024 < MEMORY_BOUND);
#else
		printf("  (no bound under a sanitizer)\n");
		assert_true(peak >= 0);
#endif
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_runs_of_a_million_tests),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
