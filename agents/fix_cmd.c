/* SPDX-License-Identifier: MIT */
/* agents/fix_cmd.c - `autopatch fix`: not built yet; its issue replaces this file. */
#include "server/commands.h"

#include <stdio.h>

int fix_main(int argc, char **argv, ap_config *cfg)
{
	(void)argc;
	(void)argv;
	(void)cfg;
	fprintf(stderr, "autopatch: 'fix' is not available yet in this build\n");
	return 2;
}
