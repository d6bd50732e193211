/* SPDX-License-Identifier: MIT */
/* agents/fixer.h - one Planner -> Builder -> Tester run on a prepared sandbox box.
 *
 * Used by `autopatch fix` (local repository, no GitHub) and by the pipeline (server jobs).
 * The fixer succeeds only with a proven patch: the reproduction test fails on the pristine
 * code and passes on the patched code, and no test that passed before fails after.
 */
#ifndef AP_FIXER_H
#define AP_FIXER_H

#include "agents/fixer_types.h"

/* Run the whole loop. Returns 0 when it ran to a verdict (check res->proven), AP_ECANCELLED,
 * AP_EBUDGET (res->failure names the budget), or another negative code for infrastructure
 * failures. res is filled as far as it got in every case; release it with
 * fixer_result_release(). */
int fixer_run(const fixer_opts *opts, fixer_result *res);

/* Check the process settings fixer_run reads (AUTOPATCH_MAX_DIFF_LINES,
 * AUTOPATCH_TESTER_SIDE_BY_SIDE), so a front end stops at start-up on a bad value instead of
 * failing every job. 0, or AP_EINVAL with a message naming the setting. */
int fixer_check_settings(const ap_config *cfg);
void fixer_result_release(fixer_result *res);

#endif
