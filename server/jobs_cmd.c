/* SPDX-License-Identifier: MIT */
/* server/jobs_cmd.c - `autopatch jobs`: not built yet; its issue replaces this file. */
#include "server/commands.h"

#include <stdio.h>

int jobs_main(int argc, char **argv, ap_config *cfg)
{
	(void)argc;
	(void)argv;
	(void)cfg;
	fprintf(stderr, "autopatch: 'jobs' is not available yet in this build\n");
	return 2;
}
