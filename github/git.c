/* SPDX-License-Identifier: MIT */
/* github/git.c - libgit2 on the host: mirror cache, per-job checkout, guarded diff
 * application, bot commits and token-authenticated pushes (see git.h). */
#include "github/git.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/redact.h"
#include "github/patch.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

struct gh_git {
	char *data_dir;
	char *name;
	char *email;
	bool allow_workflows;
	int64_t max_diff;
};

/* What the credentials callback may hand out, once. */
struct cred_ctx {
	const char *token;
	int calls;
};

/* A libgit2 failure as an AP error, with the message redacted (URLs, tokens). */
static int git_fail(int code, const char *what)
{
	const git_error *e = git_error_last();
	char *red = redact_str(e && e->message ? e->message : "unknown libgit2 error");
	int rc;

	rc = ap_error_set(code, "%s: %s", what, red ? red : "libgit2 error");
	free(red);
	return rc;
}

int gh_git_new(gh_git **out, const ap_config *cfg)
{
	gh_git *g;
	int rc;

	*out = NULL;
	if (git_libgit2_init() < 0)
		return git_fail(AP_EIO, "libgit2 failed to initialise");
	g = calloc(1, sizeof(*g));
	if (!g) {
		git_libgit2_shutdown();
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	rc = cfg_bool(cfg, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", &g->allow_workflows);
	if (!rc)
		rc = cfg_bytes(cfg, "AUTOPATCH_MAX_DIFF_BYTES", 1024, 1 << 30, &g->max_diff);
	if (rc)
		goto err_free;
	g->data_dir = strdup(cfg_str(cfg, "AUTOPATCH_DATA_DIR"));
	g->name = strdup(cfg_str(cfg, "AUTOPATCH_GIT_NAME"));
	g->email = strdup(cfg_str(cfg, "AUTOPATCH_GIT_EMAIL"));
	if (!g->data_dir || !g->name || !g->email) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto err_free;
	}
	*out = g;
	return 0;
err_free:
	gh_git_free(g);
	return rc;
}

void gh_git_free(gh_git *g)
{
	if (!g)
		return;
	free(g->data_dir);
	free(g->name);
	free(g->email);
	free(g);
	git_libgit2_shutdown();
}

/* The token goes to libgit2 only here, never into a URL or config. A second call means the
 * server refused it: stop instead of looping. */
static int cred_cb(git_credential **out, const char *url, const char *user, unsigned allowed,
		   void *payload)
{
	struct cred_ctx *c = payload;

	(void)url;
	(void)user;
	if (!c || !c->token || !(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT))
		return GIT_PASSTHROUGH;
	if (c->calls++ > 0) {
		git_error_set_str(GIT_ERROR_NET, "the server refused the installation token");
		return GIT_EAUTH;
	}
	return git_credential_userpass_plaintext_new(out, "x-access-token", c->token);
}

/* Refuse URLs with userinfo: a token in a URL ends up in logs and config files. */
static int check_url(const char *url)
{
	const char *p = strstr(url, "://"), *end;

	if (!p)
		return 0; /* a local path (tests, the cache) */
	p += 3;
	end = p + strcspn(p, "/?#");
	if (memchr(p, '@', (size_t)(end - p)))
		return ap_error_set(AP_EDENIED,
				    "refusing a git URL with credentials in it: pass the token "
				    "separately");
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		return ap_error_set(AP_EDENIED, "only http(s) git URLs are allowed");
	return 0;
}

static bool safe_component(const char *s, size_t n)
{
	if (n == 0 || n > 255)
		return false;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

/* $DATA/git/<owner>/<name>.git from the last two path components of the clone URL. */
static int cache_path(gh_git *g, const char *url, ap_buf *out)
{
	const char *end = url + strlen(url), *name, *owner;
	size_t nlen, olen;

	while (end > url && end[-1] == '/')
		end--;
	if (end - url > 4 && strncmp(end - 4, ".git", 4) == 0)
		end -= 4;
	name = end;
	while (name > url && name[-1] != '/')
		name--;
	nlen = (size_t)(end - name);
	owner = name > url ? name - 1 : url;
	while (owner > url && owner[-1] != '/' && owner[-1] != ':')
		owner--;
	olen = name > url ? (size_t)(name - 1 - owner) : 0;
	if (!safe_component(owner, olen) || !safe_component(name, nlen))
		return ap_error_set(AP_EINVAL, "cannot derive owner/name from the clone URL");
	return ap_buf_addf(out, "%s/git/%.*s/%.*s.git", g->data_dir, (int)olen, owner, (int)nlen,
			   name);
}

/* The refspec that fetches `ref` (branch name or full ref) to `dst` in the local repo. */
static int refspec_for(const char *ref, const char *dst_prefix, ap_buf *spec, ap_buf *local)
{
	int rc;

	if (strncmp(ref, "refs/", 5) == 0)
		rc = ap_buf_addf(local, "%s", ref);
	else
		rc = ap_buf_addf(local, "refs/heads/%s", ref);
	if (!rc && !git_reference_is_valid_name(ap_buf_str(local)))
		return ap_error_set(AP_EINVAL, "\"%s\" is not a valid git ref", ref);
	if (!rc)
		rc = ap_buf_addf(spec, "+%s:%s%s", ap_buf_str(local), dst_prefix ? dst_prefix : "",
				 dst_prefix ? "" : ap_buf_str(local));
	return rc;
}

/* A remote for url in repo, named or anonymous. url.<x>.insteadOf rewrites are skipped: the
 * URL we were given is the one used (and libgit2 1.5 leaks in that regex path). */
static int remote_new(git_remote **out, git_repository *repo, const char *name, const char *url)
{
	git_remote_create_options o;

	git_remote_create_options_init(&o, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	o.repository = repo;
	o.name = name;
	o.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF;
	if (!name)
		o.flags |= GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	return git_remote_create_with_opts(out, url, &o);
}

static int fetch_one(git_repository *repo, const char *url, const char *spec, struct cred_ctx *cred)
{
	git_fetch_options fo;
	git_remote *remote = NULL;
	char *specs[] = {(char *)spec};
	git_strarray refspecs = {specs, 1};
	int rc = 0;

	git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
	fo.callbacks.credentials = cred_cb;
	fo.callbacks.payload = cred;
	fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
	if (remote_new(&remote, repo, NULL, url) < 0)
		return git_fail(AP_EINVAL, "git remote");
	if (git_remote_fetch(remote, &refspecs, &fo, NULL) < 0)
		rc = git_fail(AP_EUNAVAIL, "git fetch");
	git_remote_free(remote);
	return rc;
}

/* Update the cache from url under its lock; *oid gets the fetched commit. */
static int update_cache(gh_git *g, const char *cache, const char *url, const char *token,
			const char *ref, git_oid *oid)
{
	ap_buf lockpath = AP_BUF_INIT(PATH_CAP), spec = AP_BUF_INIT(PATH_CAP),
	       local = AP_BUF_INIT(PATH_CAP);
	struct cred_ctx cred = {token, 0};
	git_repository *repo = NULL;
	int fd, rc;

	(void)g;
	rc = ap_buf_addf(&lockpath, "%s.lock", cache);
	if (rc)
		goto out;
	rc = fs_mkdir_p(cache, 0700);
	if (rc)
		goto out;
	fd = open(ap_buf_str(&lockpath), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = ap_error_set(AP_EIO, "open %s: %s", ap_buf_str(&lockpath), strerror(errno));
		goto out;
	}
	if (flock(fd, LOCK_EX) != 0) {
		rc = ap_error_set(AP_EIO, "lock %s: %s", ap_buf_str(&lockpath), strerror(errno));
		goto out_close;
	}
	if (git_repository_open_bare(&repo, cache) < 0 &&
	    git_repository_init(&repo, cache, 1) < 0) {
		rc = git_fail(AP_EIO, "git cache");
		goto out_close;
	}
	rc = refspec_for(ref, NULL, &spec, &local);
	if (!rc)
		rc = fetch_one(repo, url, ap_buf_str(&spec), &cred);
	if (!rc && git_reference_name_to_id(oid, repo, ap_buf_str(&local)) < 0)
		rc = git_fail(AP_ENOTFOUND, "git ref after fetch");
	git_repository_free(repo);
out_close:
	close(fd); /* releases the flock */
out:
	ap_buf_release(&lockpath);
	ap_buf_release(&spec);
	ap_buf_release(&local);
	return rc;
}

/* dest must be absent or an empty directory. It is never removed and re-created: the
 * sandbox may already have bind-mounted it. */
static int dir_is_empty_or_absent(const char *dir)
{
	struct dirent *e;
	struct stat st;
	DIR *d;
	int rc = 0;

	if (lstat(dir, &st) != 0)
		return errno == ENOENT ? 0
				       : ap_error_set(AP_EIO, "stat %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ap_error_set(AP_EINVAL, "%s is not a directory", dir);
	d = opendir(dir);
	if (!d)
		return ap_error_set(AP_EIO, "open %s: %s", dir, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			rc = ap_error_set(AP_EINVAL, "%s is not empty", dir);
			break;
		}
	}
	closedir(d);
	return rc;
}

int gh_git_checkout(gh_git *g, const char *clone_url, const char *token, const char *ref,
		    const char *dest_dir, char **head_sha)
{
	ap_buf cache = AP_BUF_INIT(PATH_CAP), spec = AP_BUF_INIT(PATH_CAP),
	       local = AP_BUF_INIT(PATH_CAP);
	git_checkout_options co;
	git_repository *job = NULL;
	git_remote *origin = NULL;
	char sha[GIT_OID_HEXSZ + 1];
	git_oid oid;
	bool branch;
	int rc;

	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	if (head_sha)
		*head_sha = NULL;
	rc = check_url(clone_url);
	if (!rc)
		rc = cache_path(g, clone_url, &cache);
	if (!rc)
		rc = dir_is_empty_or_absent(dest_dir);
	if (!rc)
		rc = update_cache(g, ap_buf_str(&cache), clone_url, token, ref, &oid);
	if (rc)
		goto out;

	if (git_repository_init(&job, dest_dir, 0) < 0) {
		rc = git_fail(AP_EIO, "git init of the job checkout");
		goto out;
	}
	branch = strncmp(ref, "refs/", 5) != 0;
	rc = refspec_for(ref, branch ? NULL : "refs/autopatch/base", &spec, &local);
	if (!rc)
		rc = fetch_one(job, ap_buf_str(&cache), ap_buf_str(&spec), NULL);
	if (rc)
		goto out_free_job;
	if ((branch ? git_repository_set_head(job, ap_buf_str(&local))
		    : git_repository_set_head_detached(job, &oid)) < 0) {
		rc = git_fail(AP_EIO, "git set HEAD");
		goto out_free_job;
	}
	co.checkout_strategy = GIT_CHECKOUT_FORCE;
	if (git_checkout_head(job, &co) < 0) {
		rc = git_fail(AP_EIO, "git checkout");
		goto out_free_job;
	}
	/* origin records where the code came from (no credentials in it). */
	if (remote_new(&origin, job, "origin", clone_url) < 0) {
		rc = git_fail(AP_EIO, "git remote origin");
		goto out_free_job;
	}
	git_remote_free(origin);
	if (head_sha) {
		git_oid_tostr(sha, sizeof(sha), &oid);
		*head_sha = strdup(sha);
		if (!*head_sha)
			rc = ap_error_set(AP_ENOMEM, "out of memory");
	}
out_free_job:
	git_repository_free(job);
out:
	ap_buf_release(&cache);
	ap_buf_release(&spec);
	ap_buf_release(&local);
	return rc;
}

/* ---- applying a diff ------------------------------------------------------------------- */

/* The work tree as it is on disk: no existing component of path, the last included, may be a
 * symlink (writing through one would land outside the repository). github/patch.c checked the
 * base commit's tree; this checks the files libgit2 is about to write. */
static int check_worktree(const char *dir, const char *path)
{
	ap_buf walk = AP_BUF_INIT(PATH_CAP + 4096);
	const char *p = path;
	struct stat st;
	int rc;

	rc = ap_buf_adds(&walk, dir);
	while (!rc && *p) {
		size_t n = strcspn(p, "/");

		rc = ap_buf_addf(&walk, "/%.*s", (int)n, p);
		if (!rc && lstat(ap_buf_str(&walk), &st) == 0 && S_ISLNK(st.st_mode))
			rc = ap_error_set(
			    AP_EDENIED,
			    "the patch writes through a symlink in the checkout: %.200s", path);
		p += n;
		if (*p == '/')
			p++;
	}
	ap_buf_release(&walk);
	return rc;
}

struct apply_ctx {
	const char *dir;
	int rc;
};

/* Called by git_apply for every file: modes and the work tree again, in case parsing and
 * applying ever see different deltas. */
static int apply_delta_cb(const git_diff_delta *d, void *payload)
{
	struct apply_ctx *c = payload;

	if (d->new_file.mode == GIT_FILEMODE_LINK || d->old_file.mode == GIT_FILEMODE_LINK ||
	    d->new_file.mode == GIT_FILEMODE_COMMIT || d->old_file.mode == GIT_FILEMODE_COMMIT)
		c->rc =
		    ap_error_set(AP_EDENIED, "the patch changes a symlink or a submodule: %.200s",
				 d->new_file.path ? d->new_file.path : "");
	if (!c->rc && d->old_file.path)
		c->rc = check_worktree(c->dir, d->old_file.path);
	if (!c->rc && d->new_file.path)
		c->rc = check_worktree(c->dir, d->new_file.path);
	return c->rc ? -1 : 0;
}

int gh_git_apply(gh_git *g, const char *dir, const char *diff, size_t len)
{
	gh_patch_rules rules = GH_PATCH_RULES_INIT;
	git_apply_options ao;
	struct apply_ctx ctx = {dir, 0};
	git_repository *repo = NULL;
	git_diff *d = NULL;
	int rc;

	git_apply_options_init(&ao, GIT_APPLY_OPTIONS_VERSION);
	if ((int64_t)len > g->max_diff)
		return ap_error_set(AP_ETOOBIG, "the diff is %zu bytes, over the %lld-byte cap",
				    len, (long long)g->max_diff);
	/* The whole policy on the bytes, against this checkout's HEAD, before anything else. */
	rules.allow_workflows = g->allow_workflows;
	rules.base_dir = dir;
	rc = gh_patch_check(diff, len, &rules);
	if (rc)
		return rc;
	if (len == 0 || git_diff_from_buffer(&d, diff, len) < 0)
		return git_fail(AP_EINVAL, "the diff does not parse");
	for (size_t i = 0; i < git_diff_num_deltas(d) && !rc; i++) {
		const git_diff_delta *dd = git_diff_get_delta(d, i);

		rc = check_worktree(dir, dd->old_file.path);
		if (!rc)
			rc = check_worktree(dir, dd->new_file.path);
	}
	if (rc)
		goto out_free_diff;
	if (git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		rc = git_fail(AP_EINVAL, "open the job checkout");
		goto out_free_diff;
	}
	ao.delta_cb = apply_delta_cb;
	ao.payload = &ctx;
	if (git_apply(repo, d, GIT_APPLY_LOCATION_BOTH, &ao) < 0)
		rc = ctx.rc ? ctx.rc : git_fail(AP_EINVAL, "the diff does not apply");
	git_repository_free(repo);
out_free_diff:
	git_diff_free(d);
	return rc;
}

int gh_git_changed_files(gh_git *g, const char *dir, const char *commit, char **out)
{
	git_diff_options dopts;
	git_diff_find_options fopts;
	ap_buf b = AP_BUF_INIT(1u << 20);
	git_repository *repo = NULL;
	git_object *obj = NULL;
	git_commit *parent = NULL;
	git_tree *tree = NULL, *ptree = NULL;
	git_diff *d = NULL;
	int rc = 0;

	(void)g;
	*out = NULL;
	git_diff_options_init(&dopts, GIT_DIFF_OPTIONS_VERSION);
	git_diff_find_options_init(&fopts, GIT_DIFF_FIND_OPTIONS_VERSION);
	fopts.flags = GIT_DIFF_FIND_RENAMES;
	if (git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	    git_revparse_single(&obj, repo, commit) < 0 ||
	    git_commit_tree(&tree, (git_commit *)obj) < 0) {
		rc = git_fail(AP_EINVAL, "read the pushed commit");
		goto out;
	}
	if (git_commit_parentcount((git_commit *)obj) > 0 &&
	    (git_commit_parent(&parent, (git_commit *)obj, 0) < 0 ||
	     git_commit_tree(&ptree, parent) < 0)) {
		rc = git_fail(AP_EIO, "read the pushed commit's parent");
		goto out;
	}
	if (git_diff_tree_to_tree(&d, repo, ptree, tree, &dopts) < 0 ||
	    git_diff_find_similar(d, &fopts) < 0) {
		rc = git_fail(AP_EIO, "diff the pushed commit");
		goto out;
	}
	rc = gh_patch__list(d, &b);
	if (!rc) {
		*out = ap_buf_take(&b);
		if (!*out)
			rc = ap_error_set(AP_ENOMEM, "out of memory");
	}
out:
	git_diff_free(d);
	git_tree_free(ptree);
	git_tree_free(tree);
	git_commit_free(parent);
	git_object_free(obj);
	git_repository_free(repo);
	ap_buf_release(&b);
	return rc;
}

int gh_git_commit(gh_git *g, const char *dir, const char *branch, const char *message, char **sha)
{
	ap_buf refname = AP_BUF_INIT(PATH_CAP);
	git_repository *repo = NULL;
	git_index *idx = NULL;
	git_tree *tree = NULL;
	git_commit *parent = NULL;
	git_signature *sig = NULL;
	git_reference *ref = NULL;
	git_oid tree_id, commit_id;
	char hex[GIT_OID_HEXSZ + 1];
	int rc = 0;

	if (sha)
		*sha = NULL;
	rc = ap_buf_addf(&refname, "refs/heads/%s", branch);
	if (rc)
		goto out;
	if (!git_reference_is_valid_name(ap_buf_str(&refname))) {
		rc = ap_error_set(AP_EINVAL, "\"%s\" is not a valid branch name", branch);
		goto out;
	}
	if (git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	    git_repository_index(&idx, repo) < 0 || git_index_write_tree(&tree_id, idx) < 0 ||
	    git_tree_lookup(&tree, repo, &tree_id) < 0) {
		rc = git_fail(AP_EIO, "git commit");
		goto out;
	}
	if (git_revparse_single((git_object **)&parent, repo, "HEAD^{commit}") < 0)
		parent = NULL; /* unborn HEAD: a root commit */
	if (parent && git_oid_equal(git_commit_tree_id(parent), &tree_id)) {
		rc = ap_error_set(AP_EINVAL, "nothing to commit: the change is empty");
		goto out;
	}
	if (git_signature_now(&sig, g->name, g->email) < 0) {
		rc = git_fail(AP_EINVAL, "git signature (AUTOPATCH_GIT_NAME/EMAIL)");
		goto out;
	}
	if (git_commit_create(&commit_id, repo, NULL, sig, sig, "UTF-8", message, tree,
			      parent ? 1 : 0, (const git_commit **)&parent) < 0 ||
	    git_reference_create(&ref, repo, ap_buf_str(&refname), &commit_id, 1,
				 "autopatch: commit") < 0 ||
	    git_repository_set_head(repo, ap_buf_str(&refname)) < 0) {
		rc = git_fail(AP_EIO, "git commit");
		goto out;
	}
	if (sha) {
		git_oid_tostr(hex, sizeof(hex), &commit_id);
		*sha = strdup(hex);
		if (!*sha)
			rc = ap_error_set(AP_ENOMEM, "out of memory");
	}
out:
	git_reference_free(ref);
	git_signature_free(sig);
	git_commit_free(parent);
	git_tree_free(tree);
	git_index_free(idx);
	git_repository_free(repo);
	ap_buf_release(&refname);
	return rc;
}

/* Records a per-reference rejection from the server (non-fast-forward, protected branch). */
struct push_ctx {
	struct cred_ctx cred;
	char status[AP_ERROR_MSG_MAX];
};

static int push_ref_cb(const char *refname, const char *status, void *payload)
{
	struct push_ctx *c = payload;

	/* Whole or not at all: a cut reason could end inside a secret that redaction, which
	 * runs on it later, would no longer recognise. */
	if (status && !c->status[0] &&
	    ap_fmt(c->status, sizeof(c->status), "%s: %s", refname, status)) {
		ap_error_clear();
		/* Only shown; a refname is at most 200 bytes of it. */
		snprintf(c->status, sizeof(c->status),
			 "%.200s: (the server's reason is too long to show)", refname);
	}
	return 0;
}

static int push_cred_cb(git_credential **out, const char *url, const char *user, unsigned allowed,
			void *payload)
{
	struct push_ctx *c = payload;

	return cred_cb(out, url, user, allowed, &c->cred);
}

int gh_git_push(gh_git *g, const char *dir, const char *url, const char *token, const char *branch,
		bool force)
{
	git_push_options po;
	ap_buf spec = AP_BUF_INIT(PATH_CAP);
	struct push_ctx ctx = {{token, 0}, ""};
	git_repository *repo = NULL;
	git_remote *remote = NULL;
	char *specs[1];
	git_strarray refspecs = {specs, 1};
	char *red;
	int rc;

	git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
	(void)g;
	rc = check_url(url);
	if (rc)
		goto out;
	if (force && strncmp(branch, "autopatch/", 10) != 0) {
		rc = ap_error_set(AP_EDENIED,
				  "refusing to force-push %s: only autopatch/* branches "
				  "may be overwritten",
				  branch);
		goto out;
	}
	rc = ap_buf_addf(&spec, "%srefs/heads/%s:refs/heads/%s", force ? "+" : "", branch, branch);
	if (rc)
		goto out;
	specs[0] = spec.data;
	if (git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	    remote_new(&remote, repo, NULL, url) < 0) {
		rc = git_fail(AP_EIO, "git push");
		goto out;
	}
	po.callbacks.credentials = push_cred_cb;
	po.callbacks.push_update_reference = push_ref_cb;
	po.callbacks.payload = &ctx;
	if (git_remote_push(remote, &refspecs, &po) < 0)
		rc = git_fail(AP_EUNAVAIL, "git push");
	else if (ctx.status[0]) {
		red = redact_str(ctx.status);
		rc = ap_error_set(AP_EDENIED, "git push rejected %s", red ? red : "");
		free(red);
	}
	if (rc)
		ap_err("pushing %s failed: %s", branch, ap_error_last());
	else
		ap_info("pushed %s", branch);
out:
	git_remote_free(remote);
	git_repository_free(repo);
	ap_buf_release(&spec);
	return rc;
}
