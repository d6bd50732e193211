/* SPDX-License-Identifier: MIT */
/* tests/github/test_patch.c - the host-side diff policy (github/patch.c) on hand-written diffs
 * of every form: renames, copies, deletions and mode changes of protected paths, `.git` in
 * any spelling, quoted and octal-escaped names, paths.allow/deny on both sides of a rename,
 * headers that disagree with libgit2, garbage; modes looked up in a base commit; and the
 * contents of both sides of every delta (gh_patch_read_files) from the base and the diff. */
#include "common/err.h"
#include "github/patch.h"

#include <git2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A base repository (HEAD commit) with:
 *   calc.py, src/a.py, other/b.py, .github/autopatch.yml, .github/workflows/ci.yml (100644)
 *   run.sh (100755), link -> /etc/passwd (120000), dirlink -> /etc (120000),
 *   vendor/lib (160000, a submodule) */
static char base_dir[64];

static void add_entry(git_index *idx, const char *path, unsigned mode, const char *content)
{
	git_index_entry e;

	memset(&e, 0, sizeof(e));
	e.path = path;
	e.mode = mode;
	if (mode == GIT_FILEMODE_COMMIT) {
		assert_int_equal(git_oid_fromstr(&e.id, "0123456789abcdef0123456789abcdef01234567"),
				 0);
		assert_int_equal(git_index_add(idx, &e), 0);
		return;
	}
	assert_int_equal(git_index_add_from_buffer(idx, &e, content, strlen(content)), 0);
}

static int group_setup(void **state)
{
	git_repository *repo = NULL;
	git_index *idx = NULL;
	git_signature *sig = NULL;
	git_tree *tree = NULL;
	git_oid tree_id, commit_id;

	(void)state;
	git_libgit2_init();
	snprintf(base_dir, sizeof(base_dir), "/tmp/ap-patch-XXXXXX");
	if (!mkdtemp(base_dir))
		return -1;
	assert_int_equal(git_repository_init(&repo, base_dir, 0), 0);
	assert_int_equal(git_repository_index(&idx, repo), 0);
	add_entry(idx, "calc.py", GIT_FILEMODE_BLOB, "def mean(v):\n    return sum(v) / len(v)\n");
	add_entry(idx, "src/a.py", GIT_FILEMODE_BLOB, "A = 1\n");
	add_entry(idx, "other/b.py", GIT_FILEMODE_BLOB, "B = 2\n");
	add_entry(idx, ".github/autopatch.yml", GIT_FILEMODE_BLOB, "test: make test\n");
	add_entry(idx, ".github/workflows/ci.yml", GIT_FILEMODE_BLOB, "on: push\n");
	add_entry(idx, "run.sh", GIT_FILEMODE_BLOB_EXECUTABLE, "#!/bin/sh\n");
	add_entry(idx, "link", GIT_FILEMODE_LINK, "/etc/passwd");
	add_entry(idx, "dirlink", GIT_FILEMODE_LINK, "/etc");
	add_entry(idx, "vendor/lib", GIT_FILEMODE_COMMIT, NULL);
	assert_int_equal(git_index_write_tree(&tree_id, idx), 0);
	assert_int_equal(git_tree_lookup(&tree, repo, &tree_id), 0);
	assert_int_equal(git_signature_now(&sig, "t", "t@t"), 0);
	assert_int_equal(
	    git_commit_create(&commit_id, repo, "HEAD", sig, sig, NULL, "base", tree, 0, NULL), 0);
	git_signature_free(sig);
	git_tree_free(tree);
	git_index_free(idx);
	git_repository_free(repo);
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base_dir);
	git_libgit2_shutdown();
	return system(cmd) == 0 ? 0 : -1;
}

/* A stand-in for the repository's paths.allow / paths.deny: prefixes. */
struct globs {
	const char *allow; /* NULL: everything */
	const char *deny;  /* NULL: nothing */
};

static const char *prefix_rule(void *ud, const char *path, char *buf, size_t cap)
{
	const struct globs *g = ud;

	if (g->deny && strncmp(path, g->deny, strlen(g->deny)) == 0) {
		snprintf(buf, cap, "is refused by the paths.deny glob `%s**`", g->deny);
		return buf;
	}
	if (g->allow && strncmp(path, g->allow, strlen(g->allow)) != 0)
		return "matches no paths.allow glob";
	return NULL;
}

static gh_patch_rules with_base(void)
{
	gh_patch_rules r = GH_PATCH_RULES_INIT;

	r.base_dir = base_dir;
	return r;
}

/* The diff must be refused with a sentence holding every needle (NULL-terminated). */
static void refused_with(const char *diff, const gh_patch_rules *r, ...)
{
	const char *needle;
	va_list ap;
	int rc = gh_patch_check(diff, strlen(diff), r);

	if (rc != AP_EDENIED)
		fail_msg("not refused (%s: %s):\n%s", ap_error_name(rc), ap_error_last(), diff);
	va_start(ap, r);
	while ((needle = va_arg(ap, const char *)) != NULL)
		if (!strstr(ap_error_last(), needle))
			fail_msg("sentence \"%s\" lacks \"%s\"", ap_error_last(), needle);
	va_end(ap);
	assert_true(strncmp(ap_error_last(), "the patch", 9) == 0);
}

static void accepted(const char *diff, const gh_patch_rules *r)
{
	int rc = gh_patch_check(diff, strlen(diff), r);

	if (rc != 0)
		fail_msg("refused (%s): %s\n%s", ap_error_name(rc), ap_error_last(), diff);
}

#define MODIFY_CALC                                                                                \
	"diff --git a/calc.py b/calc.py\n"                                                         \
	"index 1234567..89abcde 100644\n"                                                          \
	"--- a/calc.py\n"                                                                          \
	"+++ b/calc.py\n"                                                                          \
	"@@ -1,2 +1,4 @@\n"                                                                        \
	" def mean(v):\n"                                                                          \
	"+    if not v:\n"                                                                         \
	"+        return 0.0\n"                                                                    \
	"     return sum(v) / len(v)\n"

static void test_ordinary_changes_pass(void **state)
{
	gh_patch_rules r = with_base();

	(void)state;
	accepted(MODIFY_CALC, &r);
	accepted(MODIFY_CALC, NULL); /* the index line states the mode: no base needed */
	accepted("", &r);	     /* nothing to refuse */
	/* new file, deletion, rename without a mode (looked up: 100644), mode change */
	accepted("diff --git a/tests/test_x.py b/tests/test_x.py\nnew file mode 100644\n"
		 "index 0000000..89abcde\n--- /dev/null\n+++ b/tests/test_x.py\n"
		 "@@ -0,0 +1 @@\n+def test_x(): pass\n"
		 "diff --git a/other/b.py b/other/b.py\ndeleted file mode 100644\n"
		 "index 1234567..0000000\n--- a/other/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-B = 2\n"
		 "diff --git a/src/a.py b/src/c.py\nsimilarity index 100%\nrename from src/a.py\n"
		 "rename to src/c.py\n"
		 "diff --git a/calc.py b/calc.py\nold mode 100644\nnew mode 100755\n",
		 &r);
	/* a name with a space (git adds a TAB after it) and a quoted non-ASCII name */
	accepted(
	    "diff --git a/my file.txt b/my file.txt\nnew file mode 100644\n"
	    "index 0000000..89abcde\n--- /dev/null\n+++ b/my file.txt\t\n@@ -0,0 +1 @@\n+x\n"
	    "diff --git \"a/caf\\303\\251.txt\" \"b/caf\\303\\251.txt\"\nnew file mode 100644\n"
	    "index 0000000..89abcde\n--- /dev/null\n+++ \"b/caf\\303\\251.txt\"\n"
	    "@@ -0,0 +1 @@\n+x\n",
	    &r);
	/* a binary patch with its data: the paths are checked like any other */
	accepted("diff --git a/img.bin b/img.bin\nnew file mode 100644\n"
		 "index 0000000000000000000000000000000000000000..d5d0b8b4c4c9e936890870f6799cfbb5"
		 "ba984470\nGIT binary patch\nliteral 3\nKcmb<oC<g!m=m7En\n\nliteral 0\n"
		 "HcmV?d00001\n\n",
		 &r);
	/* .github itself is not protected, only the config and the workflows */
	accepted("diff --git a/.github/CODEOWNERS b/.github/CODEOWNERS\nnew file mode 100644\n"
		 "index 0000000..89abcde\n--- /dev/null\n+++ b/.github/CODEOWNERS\n"
		 "@@ -0,0 +1 @@\n+* @octo\n",
		 &r);
}

/* Moving the config away deletes it: the old path of a rename is checked too. */
static void test_rename_of_the_config_away(void **state)
{
	gh_patch_rules r = with_base();

	(void)state;
	refused_with("diff --git a/.github/autopatch.yml b/moved.yml\nsimilarity index 100%\n"
		     "rename from .github/autopatch.yml\nrename to moved.yml\n",
		     &r, "renames `.github/autopatch.yml` to `moved.yml`",
		     "`.github/autopatch.yml` is autopatch's own configuration", NULL);
	/* ... and into place, in any case, as .yaml too */
	refused_with("diff --git a/calc.py b/.GitHub/AutoPatch.yml\nsimilarity index 100%\n"
		     "rename from calc.py\nrename to .GitHub/AutoPatch.yml\n",
		     &r, "`.GitHub/AutoPatch.yml` is autopatch's own configuration", NULL);
	refused_with("diff --git a/.github/autopatch.yaml b/.github/autopatch.yaml\n"
		     "new file mode 100644\nindex 0000000..89abcde\n--- /dev/null\n"
		     "+++ b/.github/autopatch.yaml\n@@ -0,0 +1 @@\n+test: true\n",
		     &r, "adds `.github/autopatch.yaml`", "own configuration", NULL);
}

static void test_delete_of_the_config(void **state)
{
	gh_patch_rules r = with_base();

	(void)state;
	refused_with(
	    "diff --git a/.github/autopatch.yml b/.github/autopatch.yml\n"
	    "deleted file mode 100644\nindex 1234567..0000000\n"
	    "--- a/.github/autopatch.yml\n+++ /dev/null\n@@ -1 +0,0 @@\n-test: make test\n",
	    &r, "deletes `.github/autopatch.yml`", "own configuration", NULL);
}

static void test_copy_into_workflows(void **state)
{
	gh_patch_rules r = with_base();

	(void)state;
	refused_with("diff --git a/calc.py b/.github/workflows/evil.yml\nsimilarity index 100%\n"
		     "copy from calc.py\ncopy to .github/workflows/evil.yml\n",
		     &r, "copies `calc.py` to `.github/workflows/evil.yml`",
		     "is under .github/workflows/", "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", NULL);
	/* a copy out of the workflows touches them too (both paths are checked) */
	refused_with("diff --git a/.github/workflows/ci.yml b/ci.yml\nsimilarity index 100%\n"
		     "copy from .github/workflows/ci.yml\ncopy to ci.yml\n",
		     &r, "`.github/workflows/ci.yml` is under .github/workflows/", NULL);
	refused_with("diff --git a/.GITHUB/Workflows/x.yml b/.GITHUB/Workflows/x.yml\n"
		     "new file mode 100644\nindex 0000000..89abcde\n--- /dev/null\n"
		     "+++ b/.GITHUB/Workflows/x.yml\n@@ -0,0 +1 @@\n+on: push\n",
		     &r, "under .github/workflows/", NULL);
	/* allowed by setting */
	r.allow_workflows = true;
	accepted("diff --git a/calc.py b/.github/workflows/evil.yml\nsimilarity index 100%\n"
		 "copy from calc.py\ncopy to .github/workflows/evil.yml\n",
		 &r);
}

static void test_mode_changes_to_symlink_and_gitlink(void **state)
{
	gh_patch_rules r = with_base();

	(void)state;
	refused_with("diff --git a/calc.py b/calc.py\nold mode 100644\nnew mode 120000\n", &r,
		     "changes the mode of `calc.py`", "is a symlink (mode 120000)", NULL);
	refused_with("diff --git a/calc.py b/calc.py\nold mode 100644\nnew mode 160000\n", &r,
		     "`calc.py` is a submodule (mode 160000)", NULL);
	refused_with("diff --git a/evil b/evil\nnew file mode 120000\nindex 0000000..89abcde\n"
		     "--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+/etc/shadow\n"
		     "\\ No newline at end of file\n",
		     NULL, "adds `evil`", "symlink", NULL);
	refused_with("diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1234567\n"
		     "--- /dev/null\n+++ b/sub\n@@ -0,0 +1 @@\n+Subproject commit 1234567\n",
		     NULL, "submodule", NULL);
	refused_with("diff --git a/calc.py b/calc.py\nold mode 100644\nnew mode 040000\n", &r,
		     "mode 040000", NULL);
	/* the base says what a pure rename moves: renaming a symlink keeps it one */
	refused_with("diff --git a/link b/harmless.txt\nsimilarity index 100%\nrename from link\n"
		     "rename to harmless.txt\n",
		     &r, "renames `link` to `harmless.txt`", "`link` is a symlink", NULL);
	/* a text hunk on a symlink rewrites its target */
	refused_with("diff --git a/link b/link\nindex 1234567..89abcde 120000\n--- a/link\n"
		     "+++ b/link\n@@ -1 +1 @@\n-/etc/passwd\n\\ No newline at end of file\n"
		     "+/etc/shadow\n\\ No newline at end of file\n",
		     &r, "symlink", NULL);
	/* deleting one is a symlink change too */
	refused_with("diff --git a/link b/link\ndeleted file mode 120000\nindex 1234567..0000000\n"
		     "--- a/link\n+++ /dev/null\n@@ -1 +0,0 @@\n-/etc/passwd\n"
		     "\\ No newline at end of file\n",
		     &r, "deletes `link`", "symlink", NULL);
	/* a file written under a symlink or into a submodule of the base */
	refused_with("diff --git a/dirlink/passwd b/dirlink/passwd\nnew file mode 100644\n"
		     "index 0000000..89abcde\n--- /dev/null\n+++ b/dirlink/passwd\n"
		     "@@ -0,0 +1 @@\n+root::0:0::/:/bin/sh\n",
		     &r, "`dirlink/passwd` goes through `dirlink`, which is a symlink", NULL);
	refused_with("diff --git a/vendor/lib/x.c b/vendor/lib/x.c\nnew file mode 100644\n"
		     "index 0000000..89abcde\n--- /dev/null\n+++ b/vendor/lib/x.c\n"
		     "@@ -0,0 +1 @@\n+int x;\n",
		     &r, "which is a submodule", NULL);
	/* the diff claiming another mode than the base has */
	refused_with("diff --git a/run.sh b/run.sh\nindex 1234567..89abcde 100644\n--- a/run.sh\n"
		     "+++ b/run.sh\n@@ -1 +1 @@\n-#!/bin/sh\n+#!/bin/bash\n",
		     &r, "has mode 100755 in the base commit", NULL);
	/* without a base, a mode the diff does not state cannot be judged */
	refused_with(
	    "diff --git a/src/a.py b/src/c.py\nsimilarity index 100%\nrename from src/a.py\n"
	    "rename to src/c.py\n",
	    NULL, "no base commit", NULL);
	refused_with("diff --git a/.gitmodules b/.gitmodules\nnew file mode 100644\n"
		     "index 0000000..89abcde\n--- /dev/null\n+++ b/.gitmodules\n@@ -0,0 +1 @@\n"
		     "+[submodule \"x\"]\n",
		     &r, "`.gitmodules`", "submodules are not allowed", NULL);
}

static void test_dot_git_anywhere(void **state)
{
	static const char *const paths[] = {
	    ".git/config", "lib/.git/config",  "a/b/.GIT/hooks/pre-commit",	"lib/.git./x",
	    "lib/.git /x", "lib/GIT~1/config", "lib/.git::$INDEX_ALLOCATION/x", NULL,
	};
	char diff[1024];

	(void)state;
	for (const char *const *p = paths; *p; p++) {
		snprintf(diff, sizeof(diff),
			 "diff --git a/%s b/%s\nnew file mode 100644\nindex 0000000..89abcde\n"
			 "--- /dev/null\n+++ b/%s%s\n@@ -0,0 +1 @@\n+owned\n",
			 *p, *p, *p, strchr(*p, ' ') ? "\t" : "");
		refused_with(diff, NULL, "folds to `.git`", NULL);
	}
	/* HFS+ drops U+200C: ".g\u200cit" is .git there (octal-escaped, as git quotes it) */
	refused_with(
	    "diff --git \"a/x/.g\\342\\200\\214it/config\" "
	    "\"b/x/.g\\342\\200\\214it/config\"\nnew file mode 100644\n"
	    "index 0000000..89abcde\n--- /dev/null\n+++ \"b/x/.g\\342\\200\\214it/config\"\n"
	    "@@ -0,0 +1 @@\n+owned\n",
	    NULL, "folds to `.git`", NULL);
	/* ... in a rename's old path as much as its new one */
	refused_with("diff --git a/.git/HEAD b/HEAD.txt\nsimilarity index 100%\n"
		     "rename from .git/HEAD\nrename to HEAD.txt\n",
		     NULL, "`.git/HEAD` has a component", NULL);
	/* "gitx", ".github" and "x.git" are ordinary names */
	accepted("diff --git a/x.git/.gitx/a b/x.git/.gitx/a\nnew file mode 100644\n"
		 "index 0000000..89abcde\n--- /dev/null\n+++ b/x.git/.gitx/a\n@@ -0,0 +1 @@\n+ok\n",
		 NULL);
}

static void test_paths_outside_the_repository(void **state)
{
	(void)state;
	refused_with("diff --git a/../x b/../x\nnew file mode 100644\nindex 0000000..89abcde\n"
		     "--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+owned\n",
		     NULL, "outside the repository", NULL);
	refused_with("diff --git a/calc.py b/../calc.py\nsimilarity index 100%\n"
		     "rename from calc.py\nrename to ../calc.py\n",
		     NULL, "`../calc.py`", "outside the repository", NULL);
	/* libgit2 turns b//etc/x into etc/x: the raw header says where it meant to write */
	refused_with("diff --git a//etc/x b//etc/x\nnew file mode 100644\nindex 0000000..89abcde\n"
		     "--- /dev/null\n+++ b//etc/x\n@@ -0,0 +1 @@\n+owned\n",
		     NULL, "absolute path", NULL);
	refused_with("diff --git \"a/x\\\\y\" \"b/x\\\\y\"\nnew file mode 100644\n"
		     "index 0000000..89abcde\n--- /dev/null\n+++ \"b/x\\\\y\"\n@@ -0,0 +1 @@\n+a\n",
		     NULL, "backslash", NULL);
	refused_with("diff --git \"a/x\\ny\" \"b/x\\ny\"\nnew file mode 100644\n"
		     "index 0000000..89abcde\n--- /dev/null\n+++ \"b/x\\ny\"\n@@ -0,0 +1 @@\n+a\n",
		     NULL, "control character", "`x\\012y`", NULL);
}

/* core.quotePath: a quoted, octal-escaped name is the name it decodes to. */
static void test_quoted_names_decode_to_denied_paths(void **state)
{
	struct globs g = {NULL, "s\303\251cret/"};
	gh_patch_rules r = GH_PATCH_RULES_INIT;

	(void)state;
	r.path_rule = prefix_rule;
	r.ud = &g;
	refused_with("diff --git \"a/s\\303\\251cret/key\" \"b/s\\303\\251cret/key\"\n"
		     "new file mode 100644\nindex 0000000..89abcde\n--- /dev/null\n"
		     "+++ \"b/s\\303\\251cret/key\"\n@@ -0,0 +1 @@\n+k\n",
		     &r, "adds `s\303\251cret/key`", "paths.deny", NULL);
	/* needless escapes of plain letters still spell the config's name */
	refused_with(
	    "diff --git \"a/.github/\\141utopatch.yml\" \"b/.github/\\141utopatch.yml\"\n"
	    "deleted file mode 100644\nindex 1234567..0000000\n"
	    "--- \"a/.github/\\141utopatch.yml\"\n+++ /dev/null\n@@ -1 +0,0 @@\n-test: x\n",
	    NULL, "own configuration", NULL);
}

/* paths.allow on either side of a rename. */
static void test_allow_on_both_sides_of_a_rename(void **state)
{
	struct globs g = {"src/", NULL};
	gh_patch_rules r = with_base();

	(void)state;
	r.path_rule = prefix_rule;
	r.ud = &g;
	refused_with("diff --git a/src/a.py b/other/a.py\nsimilarity index 100%\n"
		     "rename from src/a.py\nrename to other/a.py\n",
		     &r, "renames `src/a.py` to `other/a.py`: `other/a.py` matches no paths.allow",
		     NULL);
	refused_with("diff --git a/other/b.py b/src/b.py\nsimilarity index 90%\n"
		     "rename from other/b.py\nrename to src/b.py\nindex 1234567..89abcde 100644\n"
		     "--- a/other/b.py\n+++ b/src/b.py\n@@ -1 +1 @@\n-B = 2\n+B = 3\n",
		     &r, "`other/b.py` matches no paths.allow", NULL);
	accepted("diff --git a/src/a.py b/src/z.py\nsimilarity index 100%\n"
		 "rename from src/a.py\nrename to src/z.py\n",
		 &r);
}

/* Headers that say something other than what libgit2 parsed are refused, not guessed at. */
static void test_headers_must_agree_with_libgit2(void **state)
{
	(void)state;
	/* a trailing header libgit2 skips (no content): 2 headers, 1 delta */
	refused_with(MODIFY_CALC "diff --git a/.github/autopatch.yml b/.github/autopatch.yml\n",
		     NULL, "2 `diff --git` headers", "libgit2 read 1", NULL);
	/* other prefixes (diff.mnemonicPrefix, diff.noprefix): libgit2 strips any */
	refused_with("diff --git c/calc.py w/calc.py\nindex 1234567..89abcde 100644\n"
		     "--- c/calc.py\n+++ w/calc.py\n@@ -1 +1 @@\n-a\n+b\n",
		     NULL, "header line `diff --git c/calc.py w/calc.py`", NULL);
	/* a rename whose header names another file than its `rename from` (libgit2 takes the
	 * latter) */
	refused_with("diff --git a/calc.py b/z.py\nsimilarity index 100%\n"
		     "rename from other/b.py\nrename to z.py\n",
		     NULL, "header line `diff --git a/calc.py b/z.py`", "`other/b.py`", NULL);
	/* an extended header line git never writes (diff.submodule=log) */
	refused_with("diff --git a/calc.py b/calc.py\nold mode 100644\nnew mode 100755\n"
		     "Submodule calc.py 1234567..89abcde:\n",
		     NULL, NULL);
}

static void test_garbage_and_binary_without_data(void **state)
{
	static const char nul[] = "diff --git a/x b/x\nnew file mode 100644\n\0";
	static const char *const garbage[] = {
	    "hello world\n",
	    "diff --git\n",
	    "diff --git a/x\n",
	    "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-a\n+b\n",
	    "diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n",
	    "diff --git a/x b/x\nindex zz..yy 100644\n",
	    "diff --git \"a/x b/x\nnew file mode 100644\n",
	    NULL,
	};

	(void)state;
	for (const char *const *g = garbage; *g; g++)
		assert_int_equal(gh_patch_check(*g, strlen(*g), NULL), AP_EDENIED);
	assert_int_equal(gh_patch_check(nul, sizeof(nul) - 1, NULL), AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), "NUL"));
	refused_with("diff --git a/img.bin b/img.bin\nindex 1234567..89abcde 100644\n"
		     "Binary files a/img.bin and b/img.bin differ\n",
		     NULL, "binary change without its data", NULL);
}

static void test_files_list_is_libgit2s(void **state)
{
	static const char diff[] =
	    "diff --git a/.github/autopatch.yml b/moved.yml\nsimilarity index 100%\n"
	    "rename from .github/autopatch.yml\nrename to moved.yml\n"
	    "diff --git a/other/b.py b/other/b.py\ndeleted file mode 100644\n"
	    "index 1234567..0000000\n--- a/other/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-B = "
	    "2\n" MODIFY_CALC;
	char *files = NULL;

	(void)state;
	assert_int_equal(gh_patch_files(diff, strlen(diff), &files), 0);
	assert_string_equal(files, ".github/autopatch.yml -> moved.yml\nother/b.py (deleted)\n"
				   "calc.py\n");
	free(files);
	assert_int_equal(gh_patch_files("hello\n", 6, &files), AP_EINVAL);
	assert_null(files);
}

/* ---- gh_patch_read_files ---- */

static gh_patch_read_opts read_opts(void)
{
	gh_patch_read_opts o = GH_PATCH_READ_OPTS_INIT;

	o.base_dir = base_dir;
	return o;
}

static void side_is(const char *data, size_t len, const char *want)
{
	if (!want) {
		assert_null(data);
		return;
	}
	assert_non_null(data);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(data, want, len);
	assert_int_equal(data[len], '\0');
}

static void file_is(const gh_patch_file *f, char status, const char *oldp, const char *newp,
		    const char *old_data, const char *new_data)
{
	assert_int_equal(f->status, status);
	assert_string_equal(f->old_path, oldp);
	assert_string_equal(f->new_path, newp);
	side_is(f->old_data, f->old_len, old_data);
	side_is(f->new_data, f->new_len, new_data);
	assert_false(f->binary);
	assert_false(f->too_big);
}

/* Both sides of every kind of delta: the old from the base tree, the new by applying. */
static void test_read_files_gives_both_sides(void **state)
{
	static const char diff[] = MODIFY_CALC
	    "diff --git a/tests/test_x.py b/tests/test_x.py\nnew file mode 100644\n"
	    "index 0000000..89abcde\n--- /dev/null\n+++ b/tests/test_x.py\n"
	    "@@ -0,0 +1 @@\n+def test_x(): pass\n"
	    "diff --git a/other/b.py b/other/b.py\ndeleted file mode 100644\n"
	    "index 1234567..0000000\n--- a/other/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n"
	    "-B = 2\n"
	    "diff --git a/src/a.py b/src/c.py\nsimilarity index 100%\nrename from src/a.py\n"
	    "rename to src/c.py\n"
	    "diff --git a/run.sh b/run2.sh\nsimilarity index 50%\ncopy from run.sh\n"
	    "copy to run2.sh\nindex 1234567..89abcde 100755\n--- a/run.sh\n"
	    "+++ b/run2.sh\n@@ -1 +1,2 @@\n #!/bin/sh\n+exit 0\n"
	    "diff --git a/.github/autopatch.yml b/.github/autopatch.yml\n"
	    "old mode 100644\nnew mode 100755\n";
	gh_patch_read_opts o = read_opts();
	gh_patch_file *f = NULL;
	size_t n = 0;

	(void)state;
	if (gh_patch_read_files(diff, strlen(diff), &o, &f, &n) != 0)
		fail_msg("%s", ap_error_last());
	assert_int_equal(n, 6);
	file_is(&f[0], 'M', "calc.py", "calc.py", "def mean(v):\n    return sum(v) / len(v)\n",
		"def mean(v):\n    if not v:\n        return 0.0\n    return sum(v) / len(v)\n");
	assert_int_equal(f[0].old_mode, 0100644);
	assert_int_equal(f[0].new_mode, 0100644);
	file_is(&f[1], 'A', "tests/test_x.py", "tests/test_x.py", NULL, "def test_x(): pass\n");
	assert_int_equal(f[1].old_mode, 0);
	file_is(&f[2], 'D', "other/b.py", "other/b.py", "B = 2\n", NULL);
	assert_int_equal(f[2].new_mode, 0);
	file_is(&f[3], 'R', "src/a.py", "src/c.py", "A = 1\n", "A = 1\n");
	assert_int_equal(f[3].old_mode, 0100644); /* not in the diff: the base's */
	file_is(&f[4], 'C', "run.sh", "run2.sh", "#!/bin/sh\n", "#!/bin/sh\nexit 0\n");
	assert_int_equal(f[4].new_mode, 0100755);
	file_is(&f[5], 'M', ".github/autopatch.yml", ".github/autopatch.yml", "test: make test\n",
		"test: make test\n");
	assert_int_equal(f[5].old_mode, 0100644);
	assert_int_equal(f[5].new_mode, 0100755);
	gh_patch_files_free(f, n);
	gh_patch_files_free(NULL, 0);
}

/* What the diff does to the base is computed, not read from anywhere else: a second hunk on
 * the same file applies over the first, and nothing is written into the base repository. */
static void test_read_files_writes_nothing_to_the_base(void **state)
{
	static const char added[] = "only in the patch 0b9f\n";
	char diff[512];
	gh_patch_read_opts o = read_opts();
	gh_patch_file *f = NULL;
	git_repository *repo = NULL;
	git_odb *odb = NULL;
	git_oid id;
	size_t n = 0;

	(void)state;
	snprintf(diff, sizeof(diff),
		 "diff --git a/src/a.py b/src/a.py\nindex 1234567..89abcde 100644\n--- a/src/a.py\n"
		 "+++ b/src/a.py\n@@ -1 +1 @@\n-A = 1\n+%s",
		 added);
	assert_int_equal(gh_patch_read_files(diff, strlen(diff), &o, &f, &n), 0);
	assert_int_equal(n, 1);
	side_is(f[0].new_data, f[0].new_len, added);
	gh_patch_files_free(f, n);
	assert_int_equal(git_odb_hash(&id, added, strlen(added), GIT_OBJECT_BLOB), 0);
	assert_int_equal(git_repository_open(&repo, base_dir), 0);
	assert_int_equal(git_repository_odb(&odb, repo), 0);
	assert_false(git_odb_exists(odb, &id));
	git_odb_free(odb);
	git_repository_free(repo);
}

/* Caps: a side over file_cap is not read; once total_cap is spent, later deltas are not
 * applied; a binary delta is never applied. */
static void test_read_files_caps_and_binary(void **state)
{
	static const char two[] =
	    MODIFY_CALC "diff --git a/src/a.py b/src/a.py\nindex 1234567..89abcde 100644\n"
			"--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n";
	static const char bin[] =
	    "diff --git a/img.bin b/img.bin\nnew file mode 100644\n"
	    "index 0000000000000000000000000000000000000000..d5d0b8b4c4c9e936890870f6799cfbb5"
	    "ba984470\nGIT binary patch\nliteral 3\nKcmb<oC<g!m=m7En\n\nliteral 0\n"
	    "HcmV?d00001\n\n";
	static const char grow[] =
	    "diff --git a/src/a.py b/src/a.py\nindex 1234567..89abcde 100644\n"
	    "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-A = 1\n+A = 1 + 1 + 1 + 1\n";
	gh_patch_read_opts o = read_opts();
	gh_patch_file *f = NULL;
	size_t n = 0;

	(void)state;
	/* calc.py (40 bytes) is over a 10-byte cap, src/a.py (6) is not */
	o.file_cap = 10;
	assert_int_equal(gh_patch_read_files(two, strlen(two), &o, &f, &n), 0);
	assert_int_equal(n, 2);
	assert_true(f[0].too_big);
	assert_null(f[0].old_data);
	assert_null(f[0].new_data);
	assert_int_equal(f[0].status, 'M');
	assert_string_equal(f[0].new_path, "calc.py");
	file_is(&f[1], 'M', "src/a.py", "src/a.py", "A = 1\n", "A = 2\n");
	gh_patch_files_free(f, n);
	/* 40 + 6 bytes of base against a 44-byte budget: the second delta is left out */
	o = read_opts();
	o.total_cap = 44;
	assert_int_equal(gh_patch_read_files(two, strlen(two), &o, &f, &n), 0);
	assert_false(f[0].too_big);
	assert_non_null(f[0].new_data);
	assert_true(f[1].too_big);
	assert_null(f[1].old_data);
	gh_patch_files_free(f, n);
	/* the base fits, the patched side does not: the old side is still given */
	o = read_opts();
	o.file_cap = 8;
	assert_int_equal(gh_patch_read_files(grow, strlen(grow), &o, &f, &n), 0);
	assert_true(f[0].too_big);
	side_is(f[0].old_data, f[0].old_len, "A = 1\n");
	assert_null(f[0].new_data);
	gh_patch_files_free(f, n);
	/* binary: marked, no contents */
	o = read_opts();
	assert_int_equal(gh_patch_read_files(bin, strlen(bin), &o, &f, &n), 0);
	assert_int_equal(n, 1);
	assert_true(f[0].binary);
	assert_int_equal(f[0].status, 'A');
	assert_null(f[0].new_data);
	gh_patch_files_free(f, n);
}

static void test_read_files_refuses_what_does_not_apply(void **state)
{
	static const char stale[] = "diff --git a/src/a.py b/src/a.py\nindex 1234567..89abcde "
				    "100644\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n"
				    "-A = 42\n+A = 2\n";
	static const char missing[] = "diff --git a/nope.py b/nope.py\nindex 1234567..89abcde "
				      "100644\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n"
				      "-x\n+y\n";
	static const char *const garbage[] = {
	    "hello world\n",
	    "diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n",
	    MODIFY_CALC "diff --git a/.github/autopatch.yml b/.github/autopatch.yml\n",
	    NULL,
	};
	gh_patch_read_opts o = read_opts();
	gh_patch_file *f = (gh_patch_file *)&o;
	size_t n = 7;

	(void)state;
	assert_int_equal(gh_patch_read_files(stale, strlen(stale), &o, &f, &n), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "does not apply to the base commit"));
	assert_null(f);
	assert_int_equal(n, 0);
	assert_int_equal(gh_patch_read_files(missing, strlen(missing), &o, &f, &n), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "does not apply"));
	for (const char *const *g = garbage; *g; g++) {
		assert_int_equal(gh_patch_read_files(*g, strlen(*g), &o, &f, &n), AP_EINVAL);
		assert_null(f);
	}
	/* empty: nothing to read */
	assert_int_equal(gh_patch_read_files("", 0, &o, &f, &n), 0);
	assert_null(f);
	assert_int_equal(n, 0);
	/* no base, or one that is not a repository */
	o.base_dir = NULL;
	assert_int_equal(gh_patch_read_files(MODIFY_CALC, strlen(MODIFY_CALC), &o, &f, &n),
			 AP_EINVAL);
	o.base_dir = "/nonexistent/ap-patch";
	assert_int_equal(gh_patch_read_files(MODIFY_CALC, strlen(MODIFY_CALC), &o, &f, &n), AP_EIO);
	assert_int_equal(gh_patch_read_files(MODIFY_CALC, strlen(MODIFY_CALC), NULL, &f, &n),
			 AP_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ordinary_changes_pass),
	    cmocka_unit_test(test_rename_of_the_config_away),
	    cmocka_unit_test(test_delete_of_the_config),
	    cmocka_unit_test(test_copy_into_workflows),
	    cmocka_unit_test(test_mode_changes_to_symlink_and_gitlink),
	    cmocka_unit_test(test_dot_git_anywhere),
	    cmocka_unit_test(test_paths_outside_the_repository),
	    cmocka_unit_test(test_quoted_names_decode_to_denied_paths),
	    cmocka_unit_test(test_allow_on_both_sides_of_a_rename),
	    cmocka_unit_test(test_headers_must_agree_with_libgit2),
	    cmocka_unit_test(test_garbage_and_binary_without_data),
	    cmocka_unit_test(test_files_list_is_libgit2s),
	    cmocka_unit_test(test_read_files_gives_both_sides),
	    cmocka_unit_test(test_read_files_writes_nothing_to_the_base),
	    cmocka_unit_test(test_read_files_caps_and_binary),
	    cmocka_unit_test(test_read_files_refuses_what_does_not_apply),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
