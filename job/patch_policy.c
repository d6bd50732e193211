/* SPDX-License-Identifier: MIT */
/* job/patch_policy.c - github/patch.h's rules plus the repository's path globs, for the
 * Tester's hook, the pipeline and `autopatch fix` (see patch_policy.h). */
#include "job/patch_policy.h"

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
