/* SPDX-License-Identifier: MIT */
/* job/baseline_cache.h - the pristine suite's per-test results kept on the host across jobs.
 *
 * The Tester's baseline (the repository's suite on the unchanged code) depends only on what
 * goes into its box: the commit the checkout is at, the setup products (the environment
 * cache key), the test command and the image. When all four are the same as in an earlier
 * job, that job's per-test results stand in for the run, which takes the baseline out of
 * every first round after the first job on a commit (issue 26, "Performance").
 *
 * One entry per repository: $AUTOPATCH_DATA_DIR/baseline-cache/<hash of the repository id>,
 * the host's own serialisation of the results (written by the host from the report it
 * parsed, never bytes out of a box), replaced by each newer baseline, at most
 * BASELINE_CACHE_MAX bytes. The entry holds its whole key; reading fails closed: an entry
 * that does not parse, is too big or has another key is ignored, and the suite runs.
 *
 * The commit is the checkout's HEAD id, and only when the checkout is exactly that commit:
 * the Tester copies the working tree, so a checkout with any change, untracked or ignored
 * file (`git status --ignored`) gets no reuse (`fix` on a working copy; the pipeline's fresh
 * checkout always is clean).
 *
 * Errors: 0 or a negative AP_E* with a message. Entries are written to a temporary name and
 * renamed, so workers and processes sharing the data directory never read half an entry.
 */
#ifndef AP_BASELINE_CACHE_H
#define AP_BASELINE_CACHE_H

#include "common/config.h"

#include <stdbool.h>
#include <stdint.h>

struct report; /* agents/report.h (not included: cli/fix.c has a function of that name) */

#define BASELINE_CACHE_MAX (64u << 20) /* bytes of one entry */

/* A job's inputs to the baseline. Filled by baseline_cache_init(); lives in the caller's
 * run_config for the fixer run. */
typedef struct baseline_cache {
	bool enabled;	   /* the key is complete: get and put do something */
	char path[4096];   /* the entry's file */
	char commit[72];   /* HEAD id of the clean checkout */
	char env_key[65];  /* env_setup_result.key, "" without setup */
	char image_id[80]; /* env_choice.image_id */
	char off[200];	   /* when not enabled: the part of the key that is missing, why */
	int hits, stores;  /* what happened (for events and tests) */
} baseline_cache;

/*
 * Key the cache for one job: repo_id names the entry, repo_dir is the host checkout the
 * Tester copies (its HEAD, when clean), env_key and image_id as above. Never fails: when a
 * part of the key is missing (no data directory, no image id, a checkout that is not clean or
 * not a git repository) or does not fit its field (it is never cut) c->enabled is false and the
 * baseline always runs.
 */
void baseline_cache_init(baseline_cache *c, const ap_config *cfg, const char *repo_id,
			 const char *repo_dir, const char *env_key, const char *image_id);

/* tester_baseline_get_fn with ud a baseline_cache: 1 with rep (unfinished), *exit_code and
 * *millis from the entry of this key; 0 when there is none or it is unusable (rep emptied),
 * with *miss (malloc'd; NULL only out of memory) one line saying why, also logged at info
 * level: the key is incomplete (c->off), no entry is kept, the entry cannot be read or is
 * damaged, or "the kept entry is for another commit (kept: ..., now: ...)" naming every part
 * of the key that differs (commit, environment key, image id, test command); AP_ENOMEM. */
int baseline_cache_get(void *ud, const char *test_cmd, struct report *rep, int *exit_code,
		       int64_t *millis, char **miss);

/* tester_baseline_put_fn: keep rep (finished) as this key's entry, replacing the
 * repository's earlier one. AP_ETOOBIG past BASELINE_CACHE_MAX (nothing kept), AP_EIO. */
int baseline_cache_put(void *ud, const char *test_cmd, const struct report *rep, int exit_code,
		       int64_t millis);

#endif
