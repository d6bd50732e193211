/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_kubeconfig.c - the kubeconfig reader (libyaml, then the current context's
 * cluster and user) on arbitrary text: no crash, no leak, no file opened (dir is NULL, so a
 * named file is refused), and on success a server that is set. */
#include "sandbox/k8s_api.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	k8s_kubeconfig k;

	if (k8s_kubeconfig_parse((const char *)data, size, NULL, &k) == 0) {
		if (!k.server || !k.server[0])
			abort();
		k8s_kubeconfig_release(&k);
	}
	return 0;
}
