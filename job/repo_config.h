/* SPDX-License-Identifier: MIT */
/* job/repo_config.h - the per-repository settings file `.github/autopatch.yml` (libyaml).
 *
 * The file is written by the repository's maintainers, so it is outside input: size-capped,
 * strictly validated (unknown keys are rejected, types are checked), and every error names the
 * line, quotes it and says what is wrong, because that sentence becomes the job's comment.
 *
 *   image: node                      # a flavour (python node go rust java c) or any image
 *                                    # reference (default: a flavour chosen from the checkout)
 *   setup: pip install -e .          # a command or a list of them, run once before anything
 *                                    # (the setup phase: docs/environments.md)
 *   test: python3 -m pytest -q       # the repository's test command
 *   max_iterations: 3                # Builder/Tester rounds, 1..20
 *   paths:
 *     allow: [GLOB, ...]             # the diff may only touch these (default: everything)
 *     deny: [GLOB, ...]              # ... and never these (both paths of a rename or copy)
 *   network: ["pypi.org:443"]        # egress allow-list of the setup phase (default: none)
 *   agent_network: true              # keep the allow-list after setup too (default: false)
 *   cache_key: ["requirements/dev.txt"] # files whose content keys the environment cache
 *                                    # (default: the usual lockfiles and manifests)
 *   setup_timeout: 900               # seconds for the setup phase (default 900)
 *   repro_timeout: 300               # seconds per run of the reproduction test (default 300)
 *   suite_timeout: 1200              # seconds per run of the test suite (default 1200)
 *   allow_weak_evidence: false       # accept exit-status evidence for a suite that fails on
 *                                    # the unchanged code and gives no per-test results
 *   allow_harness_changes: false     # a patch that changes the test harness may still open a
 *                                    # draft PR, marked "changes the test harness - not proven"
 *
 * Both `autopatch serve` (job/pipeline.c) and `autopatch fix` (cli/fix.c) load it with
 * repo_config_load(). Without a `test:` the test command is detected from the checkout by
 * testcmd_detect() (agents/testcmd.h, which documents the precedence), and `test_source` says
 * what was chosen and why.
 */
#ifndef AP_REPO_CONFIG_H
#define AP_REPO_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define REPO_CONFIG_PATH	".github/autopatch.yml"
#define REPO_CONFIG_MAX_BYTES	(64 * 1024)
#define REPO_CONFIG_MAX_ITER	20
#define REPO_CONFIG_MAX_TIMEOUT 86400 /* seconds; the box's life bounds them anyway */

/* A parsed file. Every string is owned by the struct; lists are NULL-terminated (never NULL
 * themselves, possibly empty). */
typedef struct repo_config {
	bool from_file;	    /* .github/autopatch.yml existed */
	char *image;	    /* NULL: the server's default image */
	char *setup;	    /* NULL: no setup; else setup_steps as one sh script (one step as it
			     * is; several one per line after "set -e") */
	char **setup_steps; /* the `setup:` commands in order; empty: none */
	char *test;	    /* NULL: none configured and none detected */
	char *test_source;  /* one sentence: "from .github/autopatch.yml" or what detection chose */
	char *test_why;	    /* NULL: `test` is from the file; else what the detector decided
			     * from ("Makefile target test"); NULL too when nothing was found */
	int max_iterations; /* 0: the fixer's default */
	char **allow;	    /* path globs the diff may touch; empty: everything */
	char **deny;	    /* path globs the diff must not touch */
	char **network;	    /* "host:port" entries; empty: no network */
	bool agent_network; /* the allow-list stays on after setup (opt-in) */
	char **cache_key;   /* globs of files keying the environment cache; empty: defaults */
	int setup_timeout;  /* seconds; 0: the Tester's default */
	int repro_timeout;  /* seconds; 0: the Tester's default */
	int suite_timeout;  /* seconds; 0: the Tester's default */
	bool allow_weak_evidence;   /* exit-status evidence accepted (the PR then warns) */
	bool allow_harness_changes; /* a harness-changing patch may be published, not proven */
} repo_config;

/* Parse the text of an autopatch.yml. On success *out is a new config (repo_config_free()).
 * AP_EINVAL with a message like
 *   ".github/autopatch.yml line 4: `max_iteration: 3`: unknown key \"max_iteration\" (allowed:
 *    image, setup, test, max_iterations, paths, network, setup_timeout, repro_timeout,
 *    suite_timeout, allow_weak_evidence)"
 * for any invalid content; AP_ETOOBIG when len passes REPO_CONFIG_MAX_BYTES. An empty document
 * is valid and means all defaults. */
int repo_config_parse(repo_config **out, const char *text, size_t len);

/* Read <repo_dir>/.github/autopatch.yml when present (parse as above), else defaults. In both
 * cases, when no test command is configured it is detected from repo_dir (testcmd_detect());
 * when nothing is detected either, test stays NULL and test_source says what was looked for.
 * The checkout is untrusted: the file is read beneath repo_dir through no symbolic link in any
 * component (common/beneath.h), so a symlinked `.github` or config file, or a non-regular
 * one, is refused with AP_EDENIED and never read. */
int repo_config_load(repo_config **out, const char *repo_dir);

/* Glob match of a repository-relative path: `*` and `?` stay inside one path segment, `**`
 * crosses segments (a trailing "**" after "src/" matches everything under src/; a leading
 * "**" then "/test_*.py" matches such a file at any depth), `[abc]` is a character class. */
bool repo_config_glob(const char *pattern, const char *path);

/* The repository's own rules for a path a patch touches (paths.allow / paths.deny): NULL when
 * they let the patch touch path, else a phrase that completes "`path` ..." and names the rule
 * ("is refused by the paths.deny glob `*.pem` in .github/autopatch.yml", "matches no
 * paths.allow glob in .github/autopatch.yml"), returned (written into buf, cap bytes, when it
 * quotes a glob; a glob that does not fit is not quoted).
 * Only the globs: the rules every patch obeys (.git, symlinks, workflows, autopatch's own
 * configuration, paths outside the repository) are github/patch.h's, and the whole policy
 * over a diff is job/patch_policy.h's. */
const char *repo_config_path_refusal(const repo_config *c, const char *path, char *buf, size_t cap);

/* Accepts NULL. */
void repo_config_free(repo_config *c);

#endif
