/* SPDX-License-Identifier: MIT */
/* job/tester_box.h - the boxes the Tester runs in: one fresh box for every test run, never the
 * Builder's, and a few of them made ahead of time.
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
 * Spares (issue 26, "Performance"): making a box (create, copy of the checkout, restore of the
 * snapshot) is most of a small round, so tester_boxes_start() keeps up to
 * AUTOPATCH_TESTER_SPARES boxes ready, made in background threads of the host while the
 * baseline and the Builder run, and a Tester run takes a ready one. The invariant stays:
 *   - every Tester box of a job is made from the same inputs (this struct: image, repo_dir,
 *     job label, snapshot, network none) by the same function, so a spare is exactly the box a
 *     run would have made on demand; nothing runs in it before the Tester takes it (only the
 *     host's own copy of the checkout and restore of the snapshot);
 *   - a box goes to one run only, and that run destroys it: never reused, never the Builder's;
 *   - a spare older than AUTOPATCH_SANDBOX_WALL_SECONDS / 6 is destroyed and made anew, so a
 *     taken box keeps most of a fresh box's life;
 *   - tester_boxes_stop() (after the fixer run, on every path) joins the threads and destroys
 *     every spare: no box is left behind.
 * A spare that cannot be made is logged and the run makes its box on demand (backing off up
 * to 30 s before the next try); it is never the job's error.
 *
 * Both front ends use it: job/pipeline.c (`serve`) and cli/fix.c, through
 * run_config_tester() (job/run_config.h).
 */
#ifndef AP_TESTER_BOX_H
#define AP_TESTER_BOX_H

#include "common/config.h"
#include "job/environment.h"
#include "sandbox/sandbox.h"

#include <signal.h>
#include <stddef.h>

#define TESTER_SPARES_MAX 4 /* AUTOPATCH_TESTER_SPARES at most */

typedef struct tester_spares tester_spares; /* the background makers (tester_box.c) */

/* What a Tester box is made from. Every pointer is borrowed and must outlive the fixer run
 * (and tester_boxes_stop()). */
typedef struct tester_boxes {
	int version;
	sbx_engine *engine;
	const char *image;		     /* the job's image (env_choice.image) */
	const char *repo_dir;		     /* the host checkout, bound read-only at /repo */
	const char *job_label;		     /* the autopatch.job label of the job's boxes */
	const env_snapshot *snapshot;	     /* the setup products; NULL: none */
	const volatile sig_atomic_t *cancel; /* optional: stops a restore */
	/* Counts for the job's events, updated atomically (the Tester's lanes take boxes at
	 * once): */
	int made;	   /* boxes handed to Tester runs (made ahead or on demand) */
	int warm;	   /* of those, spares made ahead of time */
	int dropped;	   /* spares destroyed unused (too old, or left at the end) */
	tester_spares *sp; /* NULL: every box made on demand */
} tester_boxes;

#define TESTER_BOXES_VERSION 1
#define TESTER_BOXES_INIT                                                                          \
	{                                                                                          \
		.version = TESTER_BOXES_VERSION                                                    \
	}

/* Start keeping AUTOPATCH_TESTER_SPARES (cfg; NULL or 0: none) spare boxes ready for tb, which
 * must be filled (engine, image, ...) and must not move until tester_boxes_stop(). Call once
 * the snapshot exists. A failure to start (a bad setting, no thread) is logged and leaves
 * every box made on demand: it never stops the job. */
void tester_boxes_start(tester_boxes *tb, const ap_config *cfg);

/* Check AUTOPATCH_TESTER_SPARES at start-up: 0, or AP_EINVAL with a message naming it. */
int tester_boxes_check_settings(const ap_config *cfg);

/* fixer_opts.tester_box (ud = a tester_boxes *): a fresh box for one Tester run, a ready spare
 * when there is one (or the one being made, waited for no longer than making a box took last
 * time), else one made now. *out is the caller's (sbx_destroy). On failure nothing is left
 * behind and the error is the backend's (AP_EUNAVAIL, ...) or the restore's (AP_EIO).
 * Thread-safe. */
int tester_box_make(void *ud, sbx_box **out);

/* Stop making spares: the threads are joined and every spare is destroyed (a restore under way
 * is cancelled). Idempotent; accepts a tb that was never started (or zeroed). Call it when the
 * fixer run is over, before tb or its inputs go away. */
void tester_boxes_stop(tester_boxes *tb);

/* One line for the job's events: "Tester boxes: 5 fresh boxes for 5 runs, 4 of them made ahead
 * of time; 2 spares destroyed unused". */
void tester_boxes_describe(const tester_boxes *tb, char *out, size_t n);

#endif
