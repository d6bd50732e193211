/* SPDX-License-Identifier: MIT */
/* github/git.h - git on the host with libgit2: clone cache, per-job checkout, safe diff
 * application, commit as the bot, push with x-access-token.
 *
 * Bare mirrors are cached under $AUTOPATCH_DATA_DIR/git/<owner>/<name>.git (default data dir
 * ./autopatch-data) and fetched again when reused; a per-repository lock file serializes
 * jobs on the same repository. Each job gets its own clone of the cache in a directory the
 * caller chooses (the sandbox's repo dir), checked out at the base branch or a PR's head.
 *
 * The token reaches libgit2 only through the credentials callback (user x-access-token): it
 * is never written into a URL, a remote or any file. libgit2 runs no hooks, no fsmonitor and
 * no external filter drivers, so repository-controlled config cannot run code on the host.
 * Transport error text is redacted before it is returned.
 */
#ifndef AP_GH_GIT_H
#define AP_GH_GIT_H

#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct gh_git gh_git;

/* Read AUTOPATCH_DATA_DIR, AUTOPATCH_GIT_NAME (default "autopatch[bot]"),
 * AUTOPATCH_GIT_EMAIL (default "autopatch[bot]@users.noreply.github.com"),
 * AUTOPATCH_ALLOW_WORKFLOW_CHANGES (default false) and AUTOPATCH_MAX_DIFF_BYTES (default
 * 4 MiB). Initializes libgit2. *out is freed with gh_git_free(). Thread-safe. */
int gh_git_new(gh_git **out, const ap_config *cfg);

/* Accepts NULL. */
void gh_git_free(gh_git *g);

/* Fetch clone_url into the cache (cloning it the first time) and create a fresh repository in
 * dest_dir (which must be absent or empty) checked out at `ref`: a branch name ("main",
 * "autopatch/issue-7") or a full ref ("refs/pull/7/head"). The checkout is on a local branch
 * of the same name (for a full ref: detached HEAD). token may be NULL for a public
 * repository. If head_sha is not NULL it receives the 40-hex commit id (caller frees). */
int gh_git_checkout(gh_git *g, const char *clone_url, const char *token, const char *ref,
		    const char *dest_dir, char **head_sha);

/* Apply a unified diff (as produced by `git diff --binary`) to the work tree and index of the
 * repository in dir. The whole host-side policy (github/patch.h: gh_patch_check() with dir's
 * HEAD as the base, workflows as AUTOPATCH_ALLOW_WORKFLOW_CHANGES says) runs on the bytes
 * first, then no path may go through a symlink on disk; a refusal is AP_EDENIED with the
 * sentence, before anything is written. The repository's own paths.allow/deny are the
 * caller's (job/patch_policy.h), checked before this. AP_ETOOBIG past the diff size cap,
 * AP_EINVAL when the diff does not parse or apply. */
int gh_git_apply(gh_git *g, const char *dir, const char *diff, size_t len);

/* The files commit (a sha or any revision) of the repository in dir changes against its first
 * parent (an empty tree for a root commit), renames found as `old -> new`: the host's own
 * list for "Files changed", in gh_patch_files()'s format. *out is malloc'd (caller frees). */
int gh_git_changed_files(gh_git *g, const char *dir, const char *commit, char **out);

/* Commit the index of dir on top of HEAD as the bot identity with `message`, and point local
 * branch `branch` (created or reset) and HEAD at the new commit. AP_EINVAL when the index
 * equals HEAD's tree (nothing to commit). *sha (if not NULL) gets the commit id (caller
 * frees). */
int gh_git_commit(gh_git *g, const char *dir, const char *branch, const char *message, char **sha);

/* Push local branch `branch` of dir to the same branch at url with x-access-token:token
 * credentials. force = overwrite the remote branch; allowed only for branches under
 * "autopatch/" (AP_EDENIED otherwise). Errors from the transport are redacted. */
int gh_git_push(gh_git *g, const char *dir, const char *url, const char *token, const char *branch,
		bool force);

#endif
