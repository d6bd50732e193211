/* SPDX-License-Identifier: MIT */
/* sandbox/cli.c - `autopatch sandbox`: not built yet; its issue replaces this file. */
#include "server/commands.h"

#include <stdio.h>

int sandbox_main(int argc, char **argv, ap_config *cfg)
{
	(void)argc;
	(void)argv;
	(void)cfg;
	fprintf(stderr, "autopatch: 'sandbox' is not available yet in this build\n");
	return 2;
}
