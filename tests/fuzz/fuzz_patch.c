/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_patch.c - the host-side diff policy (github/patch.c) on arbitrary bytes: it
 * never crashes, and whatever it accepts, libgit2 reads as deltas that break no rule - checked
 * here again by simpler means: no path is absolute or leaves the repository, no component is
 * `.git` in any case, no side is a symlink or a submodule, nothing lies under
 * .github/workflows/ or is autopatch's configuration, nothing matches the deny prefix. */
#include "common/buf.h"
#include "github/patch.h"

#include <git2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DENY "secret/"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (git_libgit2_init() < 0)
		abort();
	return 0;
}

static const char *deny_rule(void *ud, const char *path, char *buf, size_t cap)
{
	(void)ud;
	(void)buf;
	(void)cap;
	return strncmp(path, DENY, strlen(DENY)) == 0 ? "is denied" : NULL;
}

/* The oracle for one accepted path. */
static void check_path(const char *p)
{
	const char *c = p;

	if (!p || !*p || p[0] == '/' || strchr(p, '\\') || strncmp(p, DENY, strlen(DENY)) == 0 ||
	    strncasecmp(p, ".github/workflows/", 18) == 0 ||
	    strcasecmp(p, ".github/autopatch.yml") == 0 ||
	    strcasecmp(p, ".github/autopatch.yaml") == 0)
		abort();
	for (;;) {
		size_t n = strcspn(c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.') ||
		    (n == 4 && strncasecmp(c, ".git", 4) == 0))
			abort();
		c += n;
		if (!*c)
			break;
		c++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gh_patch_rules rules = GH_PATCH_RULES_INIT;
	const char *diff = (const char *)data;
	git_diff *d = NULL;
	char *files = NULL;

	rules.path_rule = deny_rule;
	if (gh_patch_files(diff, size, &files) == 0)
		free(files);
	if (gh_patch_check(diff, size, &rules) != 0 || size == 0)
		return 0;
	if (git_diff_from_buffer(&d, diff, size) < 0)
		abort(); /* accepted what libgit2 cannot read */
	for (size_t i = 0; i < git_diff_num_deltas(d); i++) {
		const git_diff_delta *x = git_diff_get_delta(d, i);

		if (x->old_file.path)
			check_path(x->old_file.path);
		if (x->new_file.path)
			check_path(x->new_file.path);
		if (x->old_file.mode == GIT_FILEMODE_LINK ||
		    x->new_file.mode == GIT_FILEMODE_LINK ||
		    x->old_file.mode == GIT_FILEMODE_COMMIT ||
		    x->new_file.mode == GIT_FILEMODE_COMMIT)
			abort();
	}
	git_diff_free(d);
	return 0;
}
