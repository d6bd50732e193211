/* SPDX-License-Identifier: MIT */
/* tests/job/test_patch_policy.c - the whole policy a patch passes (job/patch_policy.c): the
 * built-in rules of github/patch.c plus the repository's paths.allow / paths.deny from a real
 * .github/autopatch.yml, through the fixer's hook as the Tester calls it. */
#include "common/config.h"
#include "common/err.h"
#include "job/patch_policy.h"
#include "job/repo_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char settings[] = "paths:\n"
			       "  allow: [\"calc/**\", \"tests/**\", \"s\303\251cret/**\"]\n"
			       "  deny: [\"calc/vendor/**\", \"s\303\251cret/**\"]\n";

static int setup(void **state)
{
	repo_config *c = NULL;

	/* No git_libgit2_init() here: the policy initialises libgit2 itself, as `autopatch fix`
	 * (which has no gh_git) relies on. */
	if (repo_config_parse(&c, settings, strlen(settings)) != 0)
		return -1;
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	repo_config_free(*state);
	return 0;
}

/* The hook's answer for diff: its code, and *why (caller frees). */
static int hook(const patch_policy *p, const char *diff, char **why)
{
	return patch_policy_fixer_check((void *)p, diff, strlen(diff), why);
}

#define ADD(path)                                                                                  \
	"diff --git a/" path " b/" path "\nnew file mode 100644\nindex 0000000..89abcde\n"         \
	"--- /dev/null\n+++ b/" path "\n@@ -0,0 +1 @@\n+x\n"

static void test_repository_globs_through_the_hook(void **state)
{
	ap_config *cfg = NULL;
	patch_policy p;
	char *why = NULL;

	assert_int_equal(cfg_new_empty(&cfg), 0);
	assert_int_equal(patch_policy_init(&p, cfg, *state, NULL), 0);
	assert_int_equal(hook(&p, ADD("calc/ops.py") ADD("tests/test_ops.py"), &why), 0);
	assert_null(why);
	assert_int_equal(hook(&p, ADD("calc/ops.py") ADD("setup.py"), &why), AP_EDENIED);
	assert_string_equal(why, "the patch adds `setup.py`: `setup.py` matches no paths.allow "
				 "glob in .github/autopatch.yml");
	free(why);
	assert_int_equal(hook(&p, ADD("calc/vendor/x.py"), &why), AP_EDENIED);
	assert_non_null(strstr(why, "is refused by the paths.deny glob `calc/vendor/**` in "
				    ".github/autopatch.yml"));
	free(why);
	/* a quoted, octal-escaped name is judged by what it decodes to */
	assert_int_equal(hook(&p,
			      "diff --git \"a/s\\303\\251cret/k\" \"b/s\\303\\251cret/k\"\n"
			      "new file mode 100644\nindex 0000000..89abcde\n--- /dev/null\n"
			      "+++ \"b/s\\303\\251cret/k\"\n@@ -0,0 +1 @@\n+x\n",
			      &why),
			 AP_EDENIED);
	assert_non_null(strstr(why, "paths.deny"));
	free(why);
	/* the old path of a rename obeys the globs too (the index line states the mode) */
	assert_int_equal(hook(&p,
			      "diff --git a/docs/x.md b/calc/x.md\nsimilarity index 90%\n"
			      "rename from docs/x.md\nrename to calc/x.md\n"
			      "index 1234567..89abcde 100644\n--- a/docs/x.md\n+++ b/calc/x.md\n"
			      "@@ -1 +1 @@\n-a\n+b\n",
			      &why),
			 AP_EDENIED);
	assert_non_null(strstr(why, "`docs/x.md` matches no paths.allow"));
	free(why);
	/* the built-in rules hold whatever the globs allow */
	assert_int_equal(hook(&p, ADD("calc/.git/config"), &why), AP_EDENIED);
	assert_non_null(strstr(why, ".git"));
	free(why);
	/* a run-ending error is not a rejection: no sentence for the Builder */
	p.base_dir = "/nonexistent/ap-base";
	assert_int_equal(hook(&p, ADD("calc/ops.py"), &why), AP_EIO);
	assert_null(why);
	cfg_free(cfg);
}

static void test_workflows_follow_the_setting(void **state)
{
	ap_config *cfg = NULL;
	patch_policy p;
	repo_config *open_rules = NULL;

	(void)state;
	assert_int_equal(repo_config_parse(&open_rules, "", 0), 0);
	assert_int_equal(cfg_new_empty(&cfg), 0);
	assert_int_equal(patch_policy_init(&p, cfg, open_rules, NULL), 0);
	assert_int_equal(patch_policy_check(&p, ADD(".github/workflows/x.yml"),
					    strlen(ADD(".github/workflows/x.yml"))),
			 AP_EDENIED);
	cfg_set(cfg, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", "true");
	assert_int_equal(patch_policy_init(&p, cfg, open_rules, NULL), 0);
	assert_int_equal(patch_policy_check(&p, ADD(".github/workflows/x.yml"),
					    strlen(ADD(".github/workflows/x.yml"))),
			 0);
	/* never the configuration, whatever the setting and the globs */
	assert_int_equal(patch_policy_check(&p, ADD(".github/autopatch.yml"),
					    strlen(ADD(".github/autopatch.yml"))),
			 AP_EDENIED);
	repo_config_free(open_rules);
	cfg_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_repository_globs_through_the_hook, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_workflows_follow_the_setting, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
