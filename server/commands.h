/* SPDX-License-Identifier: MIT */
/* server/commands.h - the CLI's subcommands. Each returns the process exit code: 0 success,
 * 1 the command ran and failed, 2 bad usage or configuration (with one sentence on stderr).
 * argv[0] is the subcommand's name; cfg is loaded by main and owned by it. */
#ifndef AP_COMMANDS_H
#define AP_COMMANDS_H

#include "config.h"

int serve_main(int argc, char **argv, ap_config *cfg);   /* server/serve.c */
int jobs_main(int argc, char **argv, ap_config *cfg);    /* server/jobs_cmd.c */
int sandbox_main(int argc, char **argv, ap_config *cfg); /* sandbox/cli.c */
int doctor_main(int argc, char **argv, ap_config *cfg);  /* github/doctor.c */
int fix_main(int argc, char **argv, ap_config *cfg);     /* agents/fix_cmd.c */
int demo_main(int argc, char **argv, ap_config *cfg);    /* server/demo.c */

#endif
