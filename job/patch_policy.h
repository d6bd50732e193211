/* SPDX-License-Identifier: MIT */
/* job/patch_policy.h - the whole policy a patch from the sandbox must pass before the host
 * tests, applies or publishes it: github/patch.h's rules over the diff bytes (every delta,
 * both paths: .git, symlinks, submodules, workflows, autopatch's own configuration, paths
 * outside the repository, headers that disagree with libgit2) plus the repository's
 * paths.allow / paths.deny from .github/autopatch.yml (job/repo_config.h).
 *
 * One implementation for every place that judges a patch: the Tester's pre-test hook
 * (fixer_opts.patch_check), the pipeline before gh_git_apply(), and `autopatch fix` before it
 * calls a patch proven.
 */
#ifndef AP_PATCH_POLICY_H
#define AP_PATCH_POLICY_H

#include "common/config.h"
#include "job/repo_config.h"

#include <stdbool.h>
#include <stddef.h>

/* What a patch is judged by. Borrowed pointers; the struct outlives every check. */
typedef struct patch_policy {
	const repo_config *rc; /* paths.allow / paths.deny (NULL: none) */
	const char *base_dir;  /* the host checkout whose HEAD the diff applies to (NULL: none;
				* a mode the diff does not state is then refused) */
	bool allow_workflows;  /* AUTOPATCH_ALLOW_WORKFLOW_CHANGES */
	const char *test_cmd;  /* the repository's test command and setup (not the Builder's): */
	const char *setup_cmd; /* a file either names is test harness (agents/harness.h) */
} patch_policy;

/* Fill p from cfg (AUTOPATCH_ALLOW_WORKFLOW_CHANGES, default false), rc and base_dir.
 * AP_EINVAL with a sentence for a bad setting. */
int patch_policy_init(patch_policy *p, const ap_config *cfg, const repo_config *rc,
		      const char *base_dir);

/* Check the diff bytes. 0 when the patch may be applied; AP_EDENIED with one sentence in
 * ap_error_last() naming the rule and the path ("the patch adds `key.pem`: `key.pem` is
 * refused by the paths.deny glob `*.pem` in .github/autopatch.yml"); AP_EIO, AP_ENOMEM on failures.
 */
int patch_policy_check(const patch_policy *p, const char *diff, size_t len);

/* The fixer's pre-test hook (fixer_opts.patch_check, ud = a patch_policy *): 0 when the
 * Tester may test the diff; AP_EDENIED with *why the sentence above (malloc'd, caller
 * frees); another negative code (with *why NULL) ends the run. */
int patch_policy_fixer_check(void *ud, const char *diff, size_t len, char **why);

/* The fixer's files check (fixer_opts.files_check, ud = a patch_policy *): the changed files
 * as the host reads them from the diff's bytes and the base commit (gh_patch_read_files on
 * base_dir, which must be set), classified by agents/harness.h against test_cmd and
 * setup_cmd. Fills out (harness_reason / harness_list NULL when no file is harness; kinds
 * always) with malloc'd text the caller frees. A diff that cannot be read that way is an
 * error (AP_EINVAL with the sentence): nothing is proven without knowing. */
struct tester_files;
int patch_policy_fixer_files(void *ud, const char *diff, size_t len, struct tester_files *out);

#endif
