/* SPDX-License-Identifier: MIT */
/* job/repo_config.h - the per-repository settings file `.github/autopatch.yml` (libyaml).
 *
 * The file is written by the repository's maintainers, so it is outside input: size-capped,
 * strictly validated (unknown keys are rejected, types are checked), and every error names the
 * line, quotes it and says what is wrong, because that sentence becomes the job's comment.
 *
 *   image: python:3.12-slim          # sandbox image (default: the server's)
 *   setup: pip install -e .          # run once in the box before anything
 *   test: python3 -m pytest -q       # the repository's test command
 *   max_iterations: 3                # Builder/Tester rounds, 1..20
 *   paths:
 *     allow: [GLOB, ...]             # the diff may only touch these (default: everything)
 *     deny: [GLOB, ...]              # ... and never these
 *   network: ["pypi.org:443"]        # egress allow-list (default: no network)
 *   setup_timeout: 900               # seconds per setup run (default 900)
 *   repro_timeout: 300               # seconds per run of the reproduction test (default 300)
 *   suite_timeout: 1200              # seconds per run of the test suite (default 1200)
 *   allow_weak_evidence: false       # accept exit-status evidence for a suite that fails on
 *                                    # the unchanged code and gives no per-test results
 *
 * Without the file the test command is detected from the checkout (make test, pytest,
 * npm test, go test ./..., cargo test) and `test_source` says what was chosen and why.
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
	char *setup;	    /* NULL: no setup step */
	char *test;	    /* NULL: none configured and none detected */
	char *test_source;  /* one sentence: "from .github/autopatch.yml" or what detection chose */
	int max_iterations; /* 0: the fixer's default */
	char **allow;	    /* path globs the diff may touch; empty: everything */
	char **deny;	    /* path globs the diff must not touch */
	char **network;	    /* "host:port" entries; empty: no network */
	int setup_timeout;  /* seconds; 0: the Tester's default */
	int repro_timeout;  /* seconds; 0: the Tester's default */
	int suite_timeout;  /* seconds; 0: the Tester's default */
	bool allow_weak_evidence; /* exit-status evidence accepted (the PR then warns) */
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
 * cases, when no test command is configured it is detected from repo_dir. A symlinked or
 * non-regular config file is refused (AP_EDENIED): the checkout is untrusted. */
int repo_config_load(repo_config **out, const char *repo_dir);

/* Detect the test command from the files in repo_dir. Sets *cmd (NULL when nothing matched)
 * and *why (a sentence, always set) as malloc'd strings. Returns 0 or AP_ENOMEM. */
int repo_config_detect_test(const char *repo_dir, char **cmd, char **why);

/* Glob match of a repository-relative path: `*` and `?` stay inside one path segment, `**`
 * crosses segments (a trailing "**" after "src/" matches everything under src/; a leading
 * "**" then "/test_*.py" matches such a file at any depth), `[abc]` is a character class. */
bool repo_config_glob(const char *pattern, const char *path);

/* Whether the diff may touch path: matches an allow glob (or allow is empty) and no deny glob.
 * Paths with a ".." segment or a leading "/" are never allowed. */
bool repo_config_path_allowed(const repo_config *c, const char *path);

/* Check every path of a newline-separated list. 0 when all are allowed; AP_EDENIED with a
 * sentence naming the first refused path and the rule that refused it. */
int repo_config_check_paths(const repo_config *c, const char *paths_nl);

/* Accepts NULL. */
void repo_config_free(repo_config *c);

#endif
