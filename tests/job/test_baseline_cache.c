/* SPDX-License-Identifier: MIT */
/* tests/job/test_baseline_cache.c - the pristine suite's results kept across jobs
 * (job/baseline_cache.h): a round trip gives back every test as it was; another commit,
 * environment key, image or test command finds nothing; a damaged, oversized or foreign
 * entry is ignored; a checkout that is not exactly its commit keeps nothing; every miss says
 * why (the part of the key that differs, an absent or damaged entry, an incomplete key). A
 * real git repository in a temporary directory. */
#include "agents/report.h"
#include "common/err.h"
#include "common/fs.h"
#include "job/baseline_cache.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static ap_config *cfg;
static char root[] = "/tmp/ap-baseline-XXXXXX";
static char repo[128], data[128];

static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("failed: %s", cmd);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(root) || cfg_new_empty(&cfg))
		return -1;
	snprintf(repo, sizeof(repo), "%s/repo", root);
	snprintf(data, sizeof(data), "%s/data", root);
	sh("mkdir -p %s && cd %s && git init -q && echo x > a.py && git add -A && "
	   "git -c user.name=t -c user.email=t@t commit -qm one",
	   repo, repo);
	return cfg_set(cfg, "AUTOPATCH_DATA_DIR", data);
}

static int teardown(void **state)
{
	(void)state;
	fs_rm_rf(root);
	cfg_free(cfg);
	return 0;
}

static void sample(report *r)
{
	*r = (report)REPORT_INIT;
	assert_int_equal(report_add(r, "t::a", 4, REPORT_PASSED, NULL, 0, false), 0);
	assert_int_equal(report_add(r, "t::b", 4, REPORT_FAILED, "boom\nline 2", 11, false), 0);
	assert_int_equal(report_add(r, "t::c", 4, REPORT_SKIPPED, "", 0, false), 0);
	assert_int_equal(report_add(r, "collect", 7, REPORT_ERROR, "no module", 9, true), 0);
	report_finish(r);
}

static char last_miss[1024]; /* why the last get() found nothing ("" after a hit) */

static int get(baseline_cache *c, const char *cmd, report *out)
{
	int code = -1;
	int64_t ms = -1;
	char *miss = (char *)"unset";

	*out = (report)REPORT_INIT;
	int rc = baseline_cache_get(c, cmd, out, &code, &ms, &miss);
	if (rc == 1) {
		assert_int_equal(code, 1);
		assert_int_equal(ms, 4321);
		assert_null(miss);
		report_finish(out);
	} else {
		assert_int_equal(out->n, 0);
		assert_non_null(miss);
		assert_null(strchr(miss, '\n')); /* one line */
	}
	snprintf(last_miss, sizeof(last_miss), "%s", miss ? miss : "");
	free(miss);
	return rc;
}

/* The last miss said this. */
static void assert_miss(const char *want)
{
	if (!strstr(last_miss, want))
		fail_msg("miss reason \"%s\" does not say \"%s\"", last_miss, want);
}

static void test_round_trip_and_key(void **state)
{
	baseline_cache c, other;
	report r, back;

	(void)state;
	baseline_cache_init(&c, cfg, "owner/name", repo, "envkey", "sha256:img");
	assert_true(c.enabled);
	assert_int_equal(strlen(c.commit), 40);
	assert_int_equal(get(&c, "pytest -q", &back), 0); /* nothing kept yet */
	assert_miss("no entry is kept for this repository yet");
	sample(&r);
	r.pytest = true;
	assert_int_equal(baseline_cache_put(&c, "pytest -q", &r, 1, 4321), 0);
	assert_int_equal(get(&c, "pytest -q", &back), 1);
	assert_int_equal(back.n, r.n);
	assert_true(back.pytest);
	for (size_t i = 0; i < r.n; i++) {
		assert_string_equal(back.tests[i].id, r.tests[i].id);
		assert_int_equal(back.tests[i].outcome, r.tests[i].outcome);
		assert_int_equal(back.tests[i].collection, r.tests[i].collection);
		if (r.tests[i].message)
			assert_string_equal(back.tests[i].message, r.tests[i].message);
		else
			assert_null(back.tests[i].message);
	}
	report_release(&back);
	/* every other input misses, and the miss names the part that differs, and only it */
	assert_int_equal(get(&c, "pytest -q tests", &back), 0);
	assert_miss("the kept entry is for another test command (kept: pytest -q, now: pytest -q "
		    "tests)");
	assert_null(strstr(last_miss, "commit"));
	assert_null(strstr(last_miss, "image"));
	baseline_cache_init(&other, cfg, "owner/name", repo, "otherkey", "sha256:img");
	assert_int_equal(get(&other, "pytest -q", &back), 0);
	assert_miss("the kept entry is for another environment key (kept: envkey, now: otherkey)");
	baseline_cache_init(&other, cfg, "owner/name", repo, "envkey", "sha256:other");
	assert_int_equal(get(&other, "pytest -q", &back), 0);
	assert_miss("the kept entry is for another image id (kept: sha256:img, now: sha256:other)");
	assert_null(strstr(last_miss, "environment"));
	baseline_cache_init(&other, cfg, "owner/other", repo, "envkey", "sha256:img");
	assert_int_equal(get(&other, "pytest -q", &back), 0);
	assert_miss("no entry is kept for this repository yet");
	/* An image id too long for the key turns the cache off; a cut one could match another
	 * image's entry. */
	baseline_cache_init(
	    &other, cfg, "owner/name", repo, "envkey",
	    "sha256:img-and-then-a-good-deal-more-than-the-key-keeps-of-an-image-id-"
	    "xxxxxxxxxxxxxxxxxxxx");
	assert_false(other.enabled);
	sh("cd %s && echo y > a.py && git -c user.name=t -c user.email=t@t commit -qam two", repo);
	baseline_cache_init(&other, cfg, "owner/name", repo, "envkey", "sha256:img");
	assert_true(other.enabled);
	assert_string_not_equal(other.commit, c.commit);
	assert_int_equal(get(&other, "pytest -q", &back), 0);
	{
		char want[128];

		snprintf(want, sizeof(want), "another commit (kept: %.12s..., now: %.12s...)",
			 c.commit, other.commit);
		assert_miss(want);
	}
	/* two parts at once: both named */
	baseline_cache_init(&other, cfg, "owner/name", repo, "envkey", "sha256:other");
	assert_int_equal(get(&other, "make check", &back), 0);
	assert_miss("commit (kept: ");
	assert_miss(", image id (kept: sha256:img, now: sha256:other), test command (kept: "
		    "pytest -q, now: make check)");
	assert_int_equal(get(&c, "pytest -q", &back), 1); /* still there for the old commit */
	report_release(&back);
	report_release(&r);
}

static void test_damaged_entries_are_ignored(void **state)
{
	baseline_cache c;
	report r, back;
	ap_buf b = AP_BUF_INIT(1u << 20);

	(void)state;
	baseline_cache_init(&c, cfg, "owner/damaged", repo, "", "sha256:img");
	sample(&r);
	assert_int_equal(baseline_cache_put(&c, "make test", &r, 1, 4321), 0);
	assert_int_equal(fs_read_file(&b, c.path, 0), 0);
	assert_int_equal(get(&c, "make test", &back), 1);
	report_release(&back);
	/* cut anywhere: no half entry is ever read */
	for (size_t cut = 0; cut < b.len; cut += 7) {
		assert_int_equal(fs_write_atomic(c.path, b.data, cut, 0600), 0);
		assert_int_equal(get(&c, "make test", &back), 0);
		assert_miss("the kept entry is damaged");
	}
	/* a byte changed in a length */
	char *p = strstr(b.data, "\n0 0 4 -1\n");
	assert_non_null(p);
	p[5] = '9';
	assert_int_equal(fs_write_atomic(c.path, b.data, b.len, 0600), 0);
	assert_int_equal(get(&c, "make test", &back), 0);
	assert_miss("the kept entry is damaged");
	p[5] = '4';
	/* trailing bytes */
	assert_int_equal(ap_buf_adds(&b, "x"), 0);
	assert_int_equal(fs_write_atomic(c.path, b.data, b.len, 0600), 0);
	assert_int_equal(get(&c, "make test", &back), 0);
	/* over the size cap: not read */
	sh("truncate -s %u %s", BASELINE_CACHE_MAX + 1, c.path);
	assert_int_equal(get(&c, "make test", &back), 0);
	assert_miss("the kept entry cannot be read");
	/* a link is not followed */
	sh("rm -f %s && ln -s /etc/hostname %s", c.path, c.path);
	assert_int_equal(get(&c, "make test", &back), 0);
	assert_miss("the kept entry cannot be read");
	ap_buf_release(&b);
	report_release(&r);
}

static void test_a_checkout_that_is_not_its_commit_keeps_nothing(void **state)
{
	baseline_cache c;
	report back0;

	(void)state;
	sh("touch %s/untracked.txt", repo);
	baseline_cache_init(&c, cfg, "owner/name", repo, "", "sha256:img");
	assert_false(c.enabled);
	assert_int_equal(get(&c, "x", &back0), 0);
	assert_miss("nothing is kept or reused for this job: the checkout is not exactly its "
		    "commit");
	sh("rm %s/untracked.txt && echo z >> %s/a.py", repo, repo);
	baseline_cache_init(&c, cfg, "owner/name", repo, "", "sha256:img");
	assert_false(c.enabled);
	sh("cd %s && git checkout -q a.py", repo);
	baseline_cache_init(&c, cfg, "owner/name", repo, "", "sha256:img");
	assert_true(c.enabled);
	/* no image id, no data directory, not a repository: off */
	baseline_cache_init(&c, cfg, "owner/name", repo, "", "");
	assert_false(c.enabled);
	assert_int_equal(get(&c, "x", &back0), 0);
	assert_miss("the image has no id");
	baseline_cache_init(&c, cfg, "owner/name", root, "", "sha256:img");
	assert_false(c.enabled);
	baseline_cache_init(&c, NULL, "owner/name", repo, "", "sha256:img");
	assert_false(c.enabled);
	assert_int_equal(get(&c, "x", &back0), 0);
	assert_miss("there is no data directory (AUTOPATCH_DATA_DIR)");
	/* off: get finds nothing and put keeps nothing */
	report r, back;
	sample(&r);
	assert_int_equal(baseline_cache_put(&c, "x", &r, 1, 4321), 0);
	assert_int_equal(get(&c, "x", &back), 0);
	report_release(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_and_key),
	    cmocka_unit_test(test_damaged_entries_are_ignored),
	    cmocka_unit_test(test_a_checkout_that_is_not_its_commit_keeps_nothing),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
