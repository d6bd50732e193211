/* SPDX-License-Identifier: MIT */
/* cli/main.c - the autopatch command line: load configuration, dispatch a subcommand. */
#include "ap_config.h"
#include "cli/commands.h"
#include "common/config.h"
#include "common/err.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: autopatch <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve                     receive GitHub webhooks and run jobs\n"
    "  jobs [--json] [--id N [--trajectory]] [--limit N]\n"
    "                            list jobs and their state; one job with its events\n"
    "  fix --repo DIR (--issue-file F | --issue TEXT) [--out patch.diff]\n"
    "                            plan, build and prove a fix on a local repository\n"
    "  sandbox run [--repo DIR] [--timeout S] [--image I] -- CMD...\n"
    "                            run a command in a fresh hardened sandbox\n"
    "  doctor                    check configuration, GitHub, Docker and the model\n"
    "  demo                      the whole label -> pull request loop, locally\n"
    "  settings [--json]         every setting with its default (no values)\n"
    "  setup                     register the GitHub App in one click (prints the URL)\n"
    "  cache list|clear [--repo ID]\n"
    "                            the per-repository environment cache\n"
    "  --version, --help\n"
    "\n"
    "Settings come from ./.env and the environment; see .env.example.\n";

struct command {
	const char *name;
	int (*fn)(int argc, char **argv, ap_config *cfg);
};

static const struct command commands[] = {
    {"serve", serve_main},	 {"jobs", jobs_main},	{"sandbox", sandbox_main},
    {"doctor", doctor_main},	 {"fix", fix_main},	{"demo", demo_main},
    {"settings", settings_main}, {"setup", setup_main}, {"cache", cache_main},
};

int main(int argc, char **argv)
{
	ap_config *cfg = NULL;
	const char *level;
	int rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("autopatch %s\n", AP_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (cfg_load(&cfg, cfg_env("AUTOPATCH_ENV_FILE"))) {
			fprintf(stderr, "autopatch: %s\n", ap_error_last());
			return 2;
		}
		if (cfg_register_secrets(cfg)) {
			fprintf(stderr, "autopatch: out of memory registering secrets\n");
			cfg_free(cfg);
			return 2;
		}
		level = cfg_str(cfg, "AUTOPATCH_LOG_LEVEL");
		if (strcmp(level, "debug") == 0)
			ap_log_set_level(AP_LOG_DEBUG);
		rc = commands[i].fn(argc - 1, argv + 1, cfg);
		cfg_free(cfg);
		return rc;
	}
	fprintf(stderr, "autopatch: unknown command \"%s\"\n\n%s", argv[1], usage);
	return 2;
}
