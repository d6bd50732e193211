/* SPDX-License-Identifier: MIT */
/* job/patch_policy.c - github/patch.h's rules plus the repository's path globs, for the
 * Tester's hook, the pipeline and `autopatch fix` (see patch_policy.h). */
#include "job/patch_policy.h"

#include "agents/harness.h"
#include "agents/tester.h"
#include "common/buf.h"
#include "common/err.h"
#include "github/patch.h"

#include <stdlib.h>
#include <string.h>

int patch_policy_init(patch_policy *p, const ap_config *cfg, const repo_config *rc,
		      const char *base_dir)
{
	memset(p, 0, sizeof(*p));
	p->rc = rc;
	p->base_dir = base_dir;
	return cfg_bool(cfg, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", &p->allow_workflows);
}

/* gh_patch_path_rule over the repository's globs. */
static const char *repo_rule(void *ud, const char *path, char *buf, size_t cap)
{
	return repo_config_path_refusal(ud, path, buf, cap);
}

int patch_policy_check(const patch_policy *p, const char *diff, size_t len)
{
	gh_patch_rules rules = GH_PATCH_RULES_INIT;

	rules.allow_workflows = p->allow_workflows;
	rules.base_dir = p->base_dir;
	if (p->rc) {
		rules.path_rule = repo_rule;
		rules.ud = (void *)p->rc;
	}
	return gh_patch_check(diff, len, &rules);
}

int patch_policy_fixer_check(void *ud, const char *diff, size_t len, char **why)
{
	int rc = patch_policy_check(ud, diff, len);

	*why = NULL;
	if (rc == AP_EDENIED) {
		*why = strdup(ap_error_last());
		if (!*why)
			return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return rc;
}

#define HARNESS_NAMED 5 /* harness files named in the one-line reason */

/* The paths of the test files the patch adds, one per line, malloc'd. Only new ones: a test
 * file the patch changes may change on purpose (an iteration that asks for other behaviour
 * rewrites the test it wrote before), so it runs in the suite as the patch has it. */
static int test_paths(const harness_file *hf, size_t n, const harness_findings *found, char **out)
{
	ap_buf b = AP_BUF_INIT((size_t)4 << 20);

	*out = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *kind = harness_kind(&hf[i], found);

		if (strcmp(kind, "new test") == 0)
			ap_buf_addf(&b, "%s\n",
				    hf[i].status == 'D' ? hf[i].old_path : hf[i].new_path);
	}
	if (ap_buf_adds(&b, "") != 0) {
		ap_buf_release(&b);
		return AP_ENOMEM;
	}
	*out = strdup(ap_buf_str(&b));
	ap_buf_release(&b);
	return *out ? 0 : AP_ENOMEM;
}

int patch_policy_fixer_files(void *ud, const char *diff, size_t len, struct tester_files *out)
{
	const patch_policy *p = ud;
	gh_patch_read_opts ro = GH_PATCH_READ_OPTS_INIT;
	harness_findings found = HARNESS_FINDINGS_INIT;
	gh_patch_file *files = NULL;
	harness_file *hf = NULL;
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!p->base_dir)
		return ap_error_set(AP_EINVAL, "the files check needs the base checkout");
	ro.base_dir = p->base_dir;
	if ((rc = gh_patch_read_files(diff, len, &ro, &files, &n)))
		return rc;
	if (n && !(hf = calloc(n, sizeof(*hf)))) {
		rc = AP_ENOMEM;
		goto out_files;
	}
	for (size_t i = 0; i < n; i++)
		hf[i] = (harness_file){files[i].old_path, files[i].new_path, files[i].status,
				       files[i].old_data, files[i].old_len,  files[i].new_data,
				       files[i].new_len,  files[i].binary,   files[i].too_big};
	if ((rc = harness_classify(&found, hf, n, p->test_cmd, p->setup_cmd)) ||
	    (rc = harness_kinds_markdown(hf, n, &found, 0, &out->kinds)) ||
	    (rc = test_paths(hf, n, &found, &out->tests)))
		goto out_release;
	if (found.n && !(rc = harness_findings_reason(&found, HARNESS_NAMED, &out->harness_reason)))
		rc = harness_findings_markdown(&found, 0, &out->harness_list);
out_release:
	harness_findings_release(&found);
	free(hf);
out_files:
	gh_patch_files_free(files, n);
	if (rc) {
		free(out->kinds);
		free(out->tests);
		free(out->harness_reason);
		free(out->harness_list);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}
