/* SPDX-License-Identifier: MIT */
/* job/tester_box.h - the boxes the Tester runs in: one fresh box for every test run, never the
 * Builder's.
 *
 * A Builder that is rewarded by a passing Tester may tamper with whatever the Tester shares
 * with it: a background process, a changed tree, a planted file in HOME or /tmp, a line added
 * to the setup products' list. So every run of the Tester (the baseline, and each round's
 * pristine repro, patched repro and patched suite) gets a box of its own, made here the way
 * the job's box was made (its image, runtime and the host checkout read-only at /repo) but
 * always without network, and filled only from what the host holds: the checkout and the
 * setup snapshot taken before any model call (env_snapshot_take). The Tester builds its tree
 * in that box, runs one command, reads the results back and destroys the box.
 *
 * Both front ends use it: job/pipeline.c (`serve`) and cli/fix.c.
 */
#ifndef AP_TESTER_BOX_H
#define AP_TESTER_BOX_H

#include "job/environment.h"
#include "sandbox/sandbox.h"

#include <signal.h>

/* What a Tester box is made from. Every pointer is borrowed and must outlive the fixer run. */
typedef struct tester_boxes {
	int version;
	sbx_engine *engine;
	const char *image;		     /* the job's image (env_choice.image) */
	const char *repo_dir;		     /* the host checkout, bound read-only at /repo */
	const char *job_label;		     /* the autopatch.job label of the job's boxes */
	const env_snapshot *snapshot;	     /* the setup products; NULL: none */
	const volatile sig_atomic_t *cancel; /* optional: stops a restore */
	int made;			     /* boxes made so far (for the job's events); counted
					      * atomically: the Tester's lanes make boxes at once */
} tester_boxes;

#define TESTER_BOXES_VERSION 1
#define TESTER_BOXES_INIT                                                                          \
	{                                                                                          \
		.version = TESTER_BOXES_VERSION                                                    \
	}

/* fixer_opts.tester_box (ud = a tester_boxes *): create, prepare and fill a fresh box. *out is
 * the caller's (sbx_destroy). On failure nothing is left behind and the error is the
 * backend's (AP_EUNAVAIL, ...) or the restore's (AP_EIO). */
int tester_box_make(void *ud, sbx_box **out);

#endif
