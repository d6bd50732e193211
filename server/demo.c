/* SPDX-License-Identifier: MIT */
/* server/demo.c - `autopatch demo`: not built yet; its issue replaces this file. */
#include "server/commands.h"

#include <stdio.h>

int demo_main(int argc, char **argv, ap_config *cfg)
{
	(void)argc;
	(void)argv;
	(void)cfg;
	fprintf(stderr, "autopatch: 'demo' is not available yet in this build\n");
	return 2;
}
