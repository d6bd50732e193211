/* SPDX-License-Identifier: MIT */
/* cli/commands.h - the CLI's subcommands, one file each in cli/. Each returns the process exit
 * code: 0 success, 1 the command ran and failed, 2 bad usage or configuration (with one
 * sentence on stderr). argv[0] is the subcommand's name; cfg is loaded by main and owned by it.
 */
#ifndef AP_COMMANDS_H
#define AP_COMMANDS_H

#include "common/config.h"
#include "server/listen.h"

#include <stdbool.h>
#include <stddef.h>

int serve_main(int argc, char **argv, ap_config *cfg);	  /* cli/serve.c */
int jobs_main(int argc, char **argv, ap_config *cfg);	  /* cli/jobs.c */
int sandbox_main(int argc, char **argv, ap_config *cfg);  /* cli/sandbox.c */
int doctor_main(int argc, char **argv, ap_config *cfg);	  /* cli/doctor.c */
int fix_main(int argc, char **argv, ap_config *cfg);	  /* cli/fix.c */
int demo_main(int argc, char **argv, ap_config *cfg);	  /* cli/demo.c */
int settings_main(int argc, char **argv, ap_config *cfg); /* cli/settings.c */
int setup_main(int argc, char **argv, ap_config *cfg);	  /* cli/setup.c */

/* cli/serve.c: run the server; registration (from `setup`) lets it start without a webhook
 * secret (every delivery is refused until the App is registered) and without an App (jobs
 * wait in the queue). */
int serve_run(ap_config *cfg, bool registration);

/* cli/serve.c: the console's URL for the browser (AUTOPATCH_CONSOLE_URL, else http:// + the
 * admin listener's TCP address; "" for a unix socket), without a trailing slash. AP_EINVAL
 * with a sentence for a setting that is not an http(s) URL. */
int serve_console_url(const ap_config *cfg, const listen_spec *admin, char *out, size_t cap);
int cache_main(int argc, char **argv, ap_config *cfg); /* cli/cache.c */

#endif
