/* SPDX-License-Identifier: MIT */
/* cli/commands.h - the CLI's subcommands, one file each in cli/. Each returns the process exit
 * code: 0 success, 1 the command ran and failed, 2 bad usage or configuration (with one
 * sentence on stderr). argv[0] is the subcommand's name; cfg is loaded by main and owned by it.
 */
#ifndef AP_COMMANDS_H
#define AP_COMMANDS_H

#include "common/config.h"

int serve_main(int argc, char **argv, ap_config *cfg);	  /* cli/serve.c */
int jobs_main(int argc, char **argv, ap_config *cfg);	  /* cli/jobs.c */
int sandbox_main(int argc, char **argv, ap_config *cfg);  /* cli/sandbox.c */
int doctor_main(int argc, char **argv, ap_config *cfg);	  /* cli/doctor.c */
int fix_main(int argc, char **argv, ap_config *cfg);	  /* cli/fix.c */
int demo_main(int argc, char **argv, ap_config *cfg);	  /* cli/demo.c */
int settings_main(int argc, char **argv, ap_config *cfg); /* cli/settings.c */

#endif
