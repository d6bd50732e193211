/* SPDX-License-Identifier: MIT */
/* tests/github/test_git.c - checkout, guarded diff application, bot commit and push with
 * libgit2, against the stand-in's git http-backend with x-access-token Basic auth. */
#include "common/config.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "gh_test_util.h"
#include "github/app.h"
#include "github/git.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static gh_stub stub;
static int dir_seq;

struct fx {
	ap_config *cfg;
	gh_app *app;
	gh_git *git;
	char *token;
	char clone_url[256];
	char dir[512];
};

static int group_setup(void **state)
{
	char *body = NULL;
	long st;

	(void)state;
	if (gh_stub_start(&stub))
		return -1;
	st = gh_stub_http(&stub, "POST", "/_stub/seed",
			  "{\"repos\":[{\"full_name\":\"octo/calc\",\"files\":{"
			  "\"calc.py\":\"def add(a, b):\\n    return a - b\\n\","
			  "\"lib/util.py\":\"X = 1\\n\","
			  "\".github/workflows/ci.yml\":\"on: push\\n\"}}]}",
			  &body);
	free(body);
	/* A symlinked directory pointing outside the repository. */
	if (st == 201)
		st = gh_sh(NULL,
			   "set -e; export GIT_CONFIG_GLOBAL=/dev/null; d=%s/seedlink; "
			   "git clone -q %s/stub/git/octo/calc.git $d; cd $d; ln -s /tmp outside; "
			   "git add outside; git -c user.name=s -c user.email=s@s commit -qm link; "
			   "git push -q origin main",
			   stub.dir, stub.dir) == 0
			 ? 201
			 : -1;
	return st == 201 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	gh_stub_stop(&stub);
	return 0;
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char data[400];

	assert_non_null(f);
	snprintf(data, sizeof(data), "%s/data", stub.dir);
	assert_int_equal(cfg_new_empty(&f->cfg), 0);
	cfg_set(f->cfg, "APP_ID", stub.app_id);
	cfg_set(f->cfg, "PRIVATE_KEY_PATH", stub.key);
	cfg_set(f->cfg, "GITHUB_API_URL", stub.url);
	cfg_set(f->cfg, "AUTOPATCH_DATA_DIR", data);
	assert_int_equal(gh_app_new(&f->app, f->cfg), 0);
	assert_int_equal(gh_app_token(f->app, 1, &f->token), 0);
	assert_int_equal(gh_git_new(&f->git, f->cfg), 0);
	snprintf(f->clone_url, sizeof(f->clone_url), "%s/octo/calc.git", stub.url);
	snprintf(f->dir, sizeof(f->dir), "%s/job%d", stub.dir, ++dir_seq);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	gh_git_free(f->git);
	free(f->token);
	gh_app_free(f->app);
	cfg_free(f->cfg);
	free(f);
	return 0;
}

/* The whole file at path; the caller frees it. */
static char *read_all(const char *path)
{
	ap_buf b = AP_BUF_INIT(16 << 20);
	char *out;

	if (fs_read_file(&b, path, 0) != 0)
		fail_msg("%s", ap_error_last());
	out = ap_buf_take(&b);
	assert_non_null(out);
	ap_buf_release(&b);
	return out;
}

static const char fix_diff[] = "diff --git a/calc.py b/calc.py\n"
			       "--- a/calc.py\n"
			       "+++ b/calc.py\n"
			       "@@ -1,2 +1,2 @@\n"
			       " def add(a, b):\n"
			       "-    return a - b\n"
			       "+    return a + b\n"
			       "diff --git a/test_calc.py b/test_calc.py\n"
			       "new file mode 100644\n"
			       "--- /dev/null\n"
			       "+++ b/test_calc.py\n"
			       "@@ -0,0 +1,2 @@\n"
			       "+from calc import add\n"
			       "+assert add(2, 2) == 4\n";

/* The whole host-side path: checkout, apply, commit as the bot, push; the stand-in's bare
 * repository then has the branch with the right tree, message and author. */
static void test_push_lands_on_bare_repo(void **state)
{
	struct fx *f = *state;
	char *sha = NULL, *commit = NULL, *out = NULL, path[600];

	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, &sha), 0);
	assert_int_equal(strlen(sha), 40);
	snprintf(path, sizeof(path), "%s/calc.py", f->dir);
	out = read_all(path);
	assert_non_null(strstr(out, "return a - b"));
	free(out);
	/* The job's repository keeps no credential anywhere. */
	assert_int_not_equal(gh_sh(NULL, "grep -rqF '%s' %s/.git", f->token, f->dir), 0);

	assert_int_equal(gh_git_apply(f->git, f->dir, fix_diff, strlen(fix_diff)), 0);
	assert_int_equal(gh_git_commit(f->git, f->dir, "autopatch/issue-1",
				       "Fix add() returning the difference\n\nFixes #1\n", &commit),
			 0);
	assert_int_equal(
	    gh_git_push(f->git, f->dir, f->clone_url, f->token, "autopatch/issue-1", true), 0);
	/* Nor does the mirror cache, after a fetch and a push. */
	assert_int_equal(gh_sh(NULL, "test -d %s/data/git/octo/calc.git/objects", stub.dir), 0);
	assert_int_not_equal(gh_sh(NULL, "grep -rqaF '%s' %s/data", f->token, stub.dir), 0);
	/* Objects are zlib-compressed: read them through git. */
	assert_int_equal(
	    gh_sh(NULL,
		  "GIT_CONFIG_GLOBAL=/dev/null git --git-dir=%s/data/git/octo/calc.git "
		  "cat-file --batch-all-objects --batch | grep -c . >/dev/null",
		  stub.dir),
	    0);
	assert_int_not_equal(gh_sh(NULL,
				   "GIT_CONFIG_GLOBAL=/dev/null git --git-dir=%s/data/git/octo/"
				   "calc.git cat-file --batch-all-objects --batch | grep -qaF '%s'",
				   stub.dir, f->token),
			     0);
	assert_int_not_equal(gh_sh(NULL, "grep -rqaF '%s' %s/.git", f->token, f->dir), 0);

	assert_int_equal(gh_sh(&out,
			       "git --git-dir=%s/stub/git/octo/calc.git log -1 "
			       "--format='%%H|%%an|%%ae|%%s|%%P' refs/heads/autopatch/issue-1",
			       stub.dir),
			 0);
	assert_non_null(strstr(out, commit));
	assert_non_null(strstr(out, "|autopatch[bot]|autopatch[bot]@users.noreply.github.com|"
				    "Fix add() returning the difference|"));
	assert_non_null(strstr(out, sha)); /* parent is the base commit */
	free(out);
	assert_int_equal(gh_sh(&out,
			       "git --git-dir=%s/stub/git/octo/calc.git show "
			       "autopatch/issue-1:calc.py autopatch/issue-1:test_calc.py",
			       stub.dir),
			 0);
	assert_non_null(strstr(out, "return a + b"));
	assert_non_null(strstr(out, "assert add(2, 2) == 4"));
	free(out);
	assert_int_equal(gh_sh(&out,
			       "git --git-dir=%s/stub/git/octo/calc.git ls-tree -r --name-only "
			       "autopatch/issue-1 | sort | tr '\\n' ' '",
			       stub.dir),
			 0);
	assert_string_equal(out, ".github/workflows/ci.yml calc.py lib/util.py outside "
				 "test_calc.py ");
	free(out);

	/* Re-running the job (force-push of an autopatch/ branch) is allowed; force-pushing
	 * main is not. */
	assert_int_equal(
	    gh_git_push(f->git, f->dir, f->clone_url, f->token, "autopatch/issue-1", true), 0);
	assert_int_equal(gh_git_push(f->git, f->dir, f->clone_url, f->token, "main", true),
			 AP_EDENIED);
	/* A token in the URL is refused outright. */
	{
		char bad[2048];

		snprintf(bad, sizeof(bad), "http://x-access-token:%s@%s/octo/calc.git", f->token,
			 stub.url + 7);
		assert_int_equal(gh_git_push(f->git, f->dir, bad, NULL, "autopatch/issue-1", true),
				 AP_EDENIED);
		assert_null(strstr(ap_error_last(), f->token));
	}
	/* Once a PR is open for the branch, a later job can check out refs/pull/N/head. */
	{
		char *body = NULL, dir2[600], *sha2 = NULL, *cur = NULL;

		assert_int_equal(gh_stub_http(&stub, "POST", "/_stub/fail/clear", "{}", NULL), 204);
		gh_sh(&body,
		      "curl -s -X POST -H 'Authorization: Bearer %s' -d "
		      "'{\"title\":\"Fix\",\"head\":\"autopatch/issue-1\",\"base\":\"main\"}' "
		      "%s/repos/octo/calc/pulls",
		      f->token, stub.url);
		assert_non_null(strstr(body, "\"number\""));
		free(body);
		snprintf(dir2, sizeof(dir2), "%s-pr", f->dir);
		assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "refs/pull/1/head",
						 dir2, &sha2),
				 0);
		assert_string_equal(sha2, commit);
		assert_int_equal(
		    gh_sh(&cur, "cd %s && GIT_CONFIG_GLOBAL=/dev/null git rev-parse HEAD", dir2),
		    0);
		assert_int_equal(strncmp(cur, commit, 40), 0);
		free(cur);
		free(sha2);
	}
	free(sha);
	free(commit);
}

/* A second job reuses the cache and sees commits pushed since. */
static void test_cache_reused_and_fetched(void **state)
{
	struct fx *f = *state;
	char *sha1 = NULL, *sha2 = NULL, dir2[600];

	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, &sha1), 0);
	assert_int_equal(gh_sh(NULL,
			       "set -e; export GIT_CONFIG_GLOBAL=/dev/null; d=%s/up%d; "
			       "git clone -q %s/stub/git/octo/calc.git $d; cd $d; echo y >> "
			       "lib/util.py; git -c user.name=s -c user.email=s@s commit -qam up; "
			       "git push -q origin main",
			       stub.dir, dir_seq, stub.dir),
			 0);
	snprintf(dir2, sizeof(dir2), "%s-b", f->dir);
	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", dir2, &sha2), 0);
	assert_string_not_equal(sha1, sha2);
	/* The non-empty first directory is refused as a destination. */
	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, NULL),
			 AP_EINVAL);
	free(sha1);
	free(sha2);
}

static void expect_refused(struct fx *f, const char *diff, const char *why)
{
	char *status = NULL;

	assert_int_equal(gh_git_apply(f->git, f->dir, diff, strlen(diff)), AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), why));
	/* Nothing was written: the work tree and index are still clean. */
	assert_int_equal(gh_sh(&status,
			       "cd %s && GIT_CONFIG_GLOBAL=/dev/null git status "
			       "--porcelain",
			       f->dir),
			 0);
	assert_string_equal(status, "");
	free(status);
}

static void test_dangerous_diffs_refused(void **state)
{
	struct fx *f = *state;
	char path[600];
	struct stat st;

	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, NULL), 0);
	expect_refused(f,
		       "diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n"
		       "+++ b/../x\n@@ -0,0 +1 @@\n+owned\n",
		       "outside the repository");
	expect_refused(f,
		       "diff --git a/lib/../../x b/lib/../../x\nnew file mode 100644\n"
		       "--- /dev/null\n+++ b/lib/../../x\n@@ -0,0 +1 @@\n+owned\n",
		       "outside the repository");
	expect_refused(f,
		       "diff --git a//tmp/ap-abs b//tmp/ap-abs\nnew file mode 100644\n"
		       "--- /dev/null\n+++ b//tmp/ap-abs\n@@ -0,0 +1 @@\n+owned\n",
		       "absolute path");
	expect_refused(f,
		       "diff --git a/outside/ap-owned b/outside/ap-owned\nnew file mode 100644\n"
		       "--- /dev/null\n+++ b/outside/ap-owned\n@@ -0,0 +1 @@\n+owned\n",
		       "symlink");
	assert_int_not_equal(stat("/tmp/ap-owned", &st), 0);
	expect_refused(f,
		       "diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml\n"
		       "--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n"
		       "@@ -1 +1 @@\n-on: push\n+on: pull_request_target\n",
		       ".github/workflows/");
	expect_refused(f,
		       "diff --git a/.git/config b/.git/config\n--- a/.git/config\n"
		       "+++ b/.git/config\n@@ -1 +1 @@\n-x\n+y\n",
		       ".git");
	expect_refused(f,
		       "diff --git a/lib/.GIT/hooks/x b/lib/.GIT/hooks/x\nnew file mode 100755\n"
		       "--- /dev/null\n+++ b/lib/.GIT/hooks/x\n@@ -0,0 +1 @@\n+owned\n",
		       ".git");
	expect_refused(f,
		       "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n"
		       "+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
		       "symlink");
	expect_refused(f,
		       "diff --git a/calc.py b/../calc.py\nsimilarity index 100%\n"
		       "rename from calc.py\nrename to ../calc.py\n",
		       "outside the repository");
	snprintf(path, sizeof(path), "%s/../x", f->dir);
	assert_int_not_equal(stat(path, &st), 0);
}

/* With AUTOPATCH_ALLOW_WORKFLOW_CHANGES the same workflow change applies. */
static void test_workflow_change_allowed_when_configured(void **state)
{
	struct fx *f = *state;
	static const char diff[] =
	    "diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml\n"
	    "--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n"
	    "@@ -1 +1 @@\n-on: push\n+on: [push, pull_request]\n";
	char path[600], *out;

	cfg_set(f->cfg, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", "true");
	gh_git_free(f->git);
	assert_int_equal(gh_git_new(&f->git, f->cfg), 0);
	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, NULL), 0);
	assert_int_equal(gh_git_apply(f->git, f->dir, diff, strlen(diff)), 0);
	snprintf(path, sizeof(path), "%s/.github/workflows/ci.yml", f->dir);
	out = read_all(path);
	assert_string_equal(out, "on: [push, pull_request]\n");
	free(out);
	/* A diff that does not apply is AP_EINVAL, and a second identical commit is empty. */
	assert_int_equal(gh_git_apply(f->git, f->dir, diff, strlen(diff)), AP_EINVAL);
}

/* "Files changed" is what the commit changes against its parent, read by libgit2 on the
 * host: a rename shows as `old -> new`, a deletion is marked, whatever a sandbox would list. */
static void test_changed_files_come_from_the_commit(void **state)
{
	struct fx *f = *state;
	static const char diff[] = "diff --git a/lib/util.py b/lib/helpers.py\n"
				   "similarity index 100%\n"
				   "rename from lib/util.py\n"
				   "rename to lib/helpers.py\n"
				   "diff --git a/calc.py b/calc.py\n"
				   "deleted file mode 100644\n"
				   "--- a/calc.py\n"
				   "+++ /dev/null\n"
				   "@@ -1,2 +0,0 @@\n"
				   "-def add(a, b):\n"
				   "-    return a - b\n";
	char *commit = NULL, *files = NULL;

	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, NULL), 0);
	assert_int_equal(gh_git_apply(f->git, f->dir, diff, strlen(diff)), 0);
	assert_int_equal(gh_git_commit(f->git, f->dir, "autopatch/issue-3", "x\n", &commit), 0);
	assert_int_equal(gh_git_changed_files(f->git, f->dir, commit, &files), 0);
	assert_string_equal(files, "calc.py (deleted)\nlib/util.py -> lib/helpers.py\n");
	free(files);
	assert_int_equal(gh_git_changed_files(f->git, f->dir, "no-such-rev", &files), AP_EINVAL);
	assert_null(files);
	free(commit);
}

/* A failed push (revoked token) logs one error line without the token. */
static void test_push_failure_log_has_no_token(void **state)
{
	struct fx *f = *state;
	char logpath[600], *log;
	int fd;

	assert_int_equal(gh_git_checkout(f->git, f->clone_url, f->token, "main", f->dir, NULL), 0);
	assert_int_equal(gh_git_apply(f->git, f->dir, fix_diff, strlen(fix_diff)), 0);
	assert_int_equal(gh_git_commit(f->git, f->dir, "autopatch/issue-2", "Fix", NULL), 0);
	gh_stub_http(&stub, "POST", "/_stub/revoke", "{}", NULL);
	snprintf(logpath, sizeof(logpath), "%s/push.log", stub.dir);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	ap_log_set_fd(fd);
	assert_int_not_equal(
	    gh_git_push(f->git, f->dir, f->clone_url, f->token, "autopatch/issue-2", true), 0);
	ap_log_set_fd(2);
	close(fd);
	assert_null(strstr(ap_error_last(), f->token));
	log = read_all(logpath);
	assert_non_null(strstr(log, "pushing autopatch/issue-2 failed"));
	assert_null(strstr(log, f->token));
	assert_null(strstr(log, f->token + 4));
	free(log);
	/* And the branch did not land. */
	assert_int_not_equal(gh_sh(NULL,
				   "git --git-dir=%s/stub/git/octo/calc.git rev-parse -q --verify "
				   "refs/heads/autopatch/issue-2 >/dev/null",
				   stub.dir),
			     0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_push_lands_on_bare_repo, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_cache_reused_and_fetched, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_dangerous_diffs_refused, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_changed_files_come_from_the_commit, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_workflow_change_allowed_when_configured, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_push_failure_log_has_no_token, fx_setup,
					    fx_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
