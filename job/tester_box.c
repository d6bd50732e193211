/* SPDX-License-Identifier: MIT */
/* job/tester_box.c - a fresh box for each Tester run (see tester_box.h). */
#include "job/tester_box.h"

#include "common/err.h"

#include <stdio.h>

int tester_box_make(void *ud, sbx_box **out)
{
	tester_boxes *tb = ud;
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b = NULL;
	char why[AP_ERROR_MSG_MAX];
	int rc;

	*out = NULL;
	spec.image = tb->image;
	spec.repo_dir = tb->repo_dir;
	spec.job_label = tb->job_label;
	spec.network = SBX_NET_NONE; /* whatever the job's setup had */
	if ((rc = sbx_create(tb->engine, &spec, &b)))
		return rc;
	sbx_box_set_phase(b, "tester");
	if ((rc = sbx_prepare(b)) || (rc = env_snapshot_restore(tb->snapshot, b, tb->cancel)))
		goto out_destroy;
	__atomic_add_fetch(&tb->made, 1, __ATOMIC_RELAXED); /* two lanes make boxes at once */
	*out = b;
	return 0;
out_destroy:
	snprintf(why, sizeof(why), "%s", ap_error_last()); /* the first error is the one to tell */
	(void)sbx_destroy(b);
	return ap_error_set(rc, "%s", why);
}
