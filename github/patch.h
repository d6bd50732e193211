/* SPDX-License-Identifier: MIT */
/* github/patch.h - the host-side diff policy: what a patch from the sandbox may change,
 * decided from the diff's own bytes.
 *
 * Nothing the sandbox reports about a patch is trusted (its file list, its `git diff` flags,
 * its quoting): the bytes are parsed here with libgit2 (git_diff_from_buffer), every delta is
 * enumerated - old and new path, renames, copies, deletions, mode changes, binary patches -
 * and every rule below is applied to BOTH paths of every delta before anything is applied.
 * The raw `diff --git`, `---`/`+++`, `rename`/`copy` and mode lines are read independently
 * and must say exactly what libgit2 parsed (quoted names decoded, `a/`/`b/` prefixes
 * required), so a header libgit2 normalizes or reads differently is refused, not guessed at.
 *
 * Rules (each refusal is one sentence naming the rule and the path):
 *   - the diff parses (git format only), holds no NUL byte, and its headers agree with libgit2;
 *   - every path is relative, non-empty, without "." / ".." / empty components, backslashes or
 *     control characters, at most 4096 bytes;
 *   - no component is `.git` in any form a filesystem folds to it (case, trailing dots and
 *     spaces, NTFS `git~1` and `::$DATA` streams, HFS+ ignorable Unicode code points), and
 *     none is `.gitmodules` in any form (submodules are refused);
 *   - no symlink (mode 120000) and no submodule / gitlink (160000) on either side, and only
 *     regular-file modes (100644, 100755) anywhere in the headers;
 *   - nothing under `.github/workflows/` unless allow_workflows;
 *   - never autopatch's own configuration, `.github/autopatch.yml` or `.yaml` (any case);
 *   - the caller's rule (the repository's paths.allow / paths.deny, job/patch_policy.h);
 *   - binary changes only as `GIT binary patch` data (their paths are checked the same way);
 *     "Binary files ... differ" without data is refused;
 *   - with a base repository: a mode the diff does not state (a pure rename) is looked up in
 *     the base commit, and no path goes through a symlink, submodule or file of the base tree.
 */
#ifndef AP_GH_PATCH_H
#define AP_GH_PATCH_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>

/* The caller's rule for one path. NULL when path is allowed; else a phrase completing
 * "`path` ..." that names the rule ("is refused by the paths.deny glob `x` in ..."), written
 * into buf (cap bytes) and returned. Called for both paths of every delta, after the built-in
 * rules passed for that path. */
typedef const char *(*gh_patch_path_rule)(void *ud, const char *path, char *buf, size_t cap);

typedef struct gh_patch_rules {
	int version;
	bool allow_workflows;	      /* AUTOPATCH_ALLOW_WORKFLOW_CHANGES */
	const char *base_dir;	      /* repository whose HEAD commit the diff applies to;
				       * NULL: none (an unstated mode is then refused) */
	gh_patch_path_rule path_rule; /* the repository's rules, or NULL */
	void *ud;		      /* passed to path_rule */
} gh_patch_rules;

#define GH_PATCH_RULES_VERSION 1
#define GH_PATCH_RULES_INIT                                                                        \
	{                                                                                          \
		.version = GH_PATCH_RULES_VERSION                                                  \
	}

/* Check the diff bytes [diff, diff+len) against every rule above. 0 when the patch may be
 * applied (an empty diff has nothing to refuse); AP_EDENIED with a sentence in
 * ap_error_last() ("the patch renames `.github/autopatch.yml` to `x.yml`:
 * `.github/autopatch.yml` is autopatch's own configuration, which a patch may never change");
 * AP_EIO when base_dir cannot be read; AP_ENOMEM. Paths in the sentence are escaped (control
 * bytes, backslash and backtick as \ooo) and capped. rules may be NULL (built-in rules only).
 * Thread-safe; initialises libgit2 for the call itself. */
int gh_patch_check(const char *diff, size_t len, const gh_patch_rules *rules);

/* The files a diff touches as parsed by libgit2 (not as any sandbox listed them), one per line:
 * "path", "old -> new" for a rename, "old -> new (copy)", "path (deleted)". *out is malloc'd
 * (caller frees). AP_EINVAL when the diff does not parse. */
int gh_patch_files(const char *diff, size_t len, char **out);

/* ---- the files of a diff with their contents, for the harness detector ---- */

/* One delta of a diff as libgit2 reads it, with the bytes of both sides computed on the host:
 * the old side from the base repository's HEAD tree, the new side by applying the diff to that
 * tree (git_apply_to_tree) - nothing else is read. */
typedef struct gh_patch_file {
	char *old_path;		     /* path in the base commit ('A': the new path) */
	char *new_path;		     /* path after the patch ('D': the old path) */
	char status;		     /* 'A' added, 'D' deleted, 'M' modified (content or mode),
				      * 'R' renamed, 'C' copied */
	unsigned old_mode, new_mode; /* 100644, 100755, ...; 0 for a side that does not exist */
	char *old_data;		     /* the base commit's bytes at old_path, NUL-terminated; NULL
				      * for 'A' and when not read (binary, too_big) */
	size_t old_len;
	char *new_data; /* the bytes at new_path once the whole diff is applied,
			 * NUL-terminated; NULL for 'D' and when not read */
	size_t new_len;
	bool binary;  /* a binary delta: neither side is read */
	bool too_big; /* a side that exists was not read: over file_cap, or the
		       * base bytes of earlier deltas used up total_cap */
} gh_patch_file;

typedef struct gh_patch_read_opts {
	int version;
	const char *base_dir; /* the repository whose HEAD commit the diff applies to (required) */
	size_t file_cap;      /* bytes of one side of one file (default 1 MiB) */
	size_t total_cap;     /* base bytes all deltas together may be applied to (16 MiB) */
} gh_patch_read_opts;

#define GH_PATCH_READ_OPTS_VERSION 1
#define GH_PATCH_READ_OPTS_INIT                                                                    \
	{                                                                                          \
		.version = GH_PATCH_READ_OPTS_VERSION, .file_cap = (size_t)1 << 20,                \
		.total_cap = (size_t)16 << 20                                                      \
	}

/* Every delta of the diff bytes [diff, diff+len), in the diff's order, with its contents.
 * *out (malloc'd, free with gh_patch_files_free()) gets *n entries; 0 with *out NULL and *n 0
 * for an empty diff. A delta whose base side is larger than file_cap, or would take the base
 * bytes applied so far past total_cap, is not applied and comes back too_big with neither side
 * read; a new side larger than file_cap comes back too_big with only the old side read; a
 * binary delta is not applied and comes back binary. Memory stays below about twice
 * (total_cap + len). Paths are libgit2's reading, not escaped: the caller escapes them before
 * they reach text. Nothing is written to base_dir: the applied blobs go to an in-memory object
 * database (libgit2 may refresh the modification time of an object the base already holds).
 *
 * This reads the diff as libgit2 does; whether the patch may be applied at all is
 * gh_patch_check()'s question, to be asked first. AP_EINVAL with a sentence when the diff does
 * not parse ("the patch does not parse as a git diff: ..."), holds no delta, its headers and
 * libgit2 disagree on the number of deltas, or it does not apply to the base commit ("the
 * patch does not apply to the base commit: ..."), or base_dir is missing; AP_EIO when base_dir
 * cannot be read; AP_ENOMEM. Thread-safe; initialises libgit2 for the call itself. */
int gh_patch_read_files(const char *diff, size_t len, const gh_patch_read_opts *o,
			gh_patch_file **out, size_t *n);

/* Free the n entries of f and f itself. Accepts NULL. */
void gh_patch_files_free(gh_patch_file *f, size_t n);

/* ---- for github/ only ---- */

struct git_diff;

/* Append the file list of d to out, in gh_patch_files()'s format. */
int gh_patch__list(struct git_diff *d, ap_buf *out);

#endif
