/* SPDX-License-Identifier: MIT */
/* sandbox/k8s.c - the Kubernetes backend of sandbox.h (placeholder while it is written). */
#include "sandbox/backend.h"
#include "common/err.h"

static int k8s_open(sbx_engine *e, const ap_config *cfg)
{
	return ap_error_set(AP_EUNAVAIL, "the kubernetes sandbox backend is not built yet");
}

const sbx_backend_ops sbx_k8s_ops = {
    .name = "kubernetes",
    .open = k8s_open,
};
