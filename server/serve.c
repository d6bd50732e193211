/* SPDX-License-Identifier: MIT */
/* server/serve.c - `autopatch serve`: not built yet; its issue replaces this file. */
#include "server/commands.h"

#include <stdio.h>

int serve_main(int argc, char **argv, ap_config *cfg)
{
	(void)argc;
	(void)argv;
	(void)cfg;
	fprintf(stderr, "autopatch: 'serve' is not available yet in this build\n");
	return 2;
}
