/* SPDX-License-Identifier: MIT */
/* github/doctor.c - `autopatch doctor`: not built yet; its issue replaces this file. */
#include "server/commands.h"

#include <stdio.h>

int doctor_main(int argc, char **argv, ap_config *cfg)
{
	(void)argc;
	(void)argv;
	(void)cfg;
	fprintf(stderr, "autopatch: 'doctor' is not available yet in this build\n");
	return 2;
}
