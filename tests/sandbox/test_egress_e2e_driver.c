/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_egress_e2e_driver.c - egress-e2e-driver: holds one job's egress network
 * and proxy up for tests/e2e/test_egress.py, which runs sandbox containers on it.
 *
 * Usage: egress-e2e-driver [--runtime R] [--job J] host:port...
 * Settings come from the environment and .env like autopatch's (DOCKER_HOST,
 * AUTOPATCH_OWNER_ID, AUTOPATCH_EGRESS_*). Prints one JSON line {"network", "proxy_url",
 * "env"} once the proxy listens, then per stdin line "drain" prints {"denials": N}; at EOF it
 * tears down and prints {"down": rc, "denials": N}. Log lines go to stderr. Exit 1 when up
 * fails (the sentence on stderr).
 */
#include "common/config.h"
#include "common/err.h"
#include "sandbox/egress.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_json(cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);

	if (s)
		printf("%s\n", s);
	fflush(stdout);
	free(s);
	cJSON_Delete(j);
}

int main(int argc, char **argv)
{
	const char *runtime = "runc", *job = "egress-e2e", *owner;
	const char **allow = calloc((size_t)argc + 1, sizeof(*allow));
	ap_config *cfg = NULL;
	dk_client *dk = NULL;
	sbx_egress_opts opts;
	sbx_egress *eg = NULL;
	char line[64];
	size_t n = 0;
	int rc = 1, denials;
	cJSON *j, *env;

	for (int i = 1; allow && i < argc; i++) {
		if (strcmp(argv[i], "--runtime") == 0 && i + 1 < argc)
			runtime = argv[++i];
		else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc)
			job = argv[++i];
		else
			allow[n++] = argv[i];
	}
	if (!allow || cfg_load(&cfg, cfg_env("AUTOPATCH_ENV_FILE")) ||
	    sbx_egress_opts_load(&opts, cfg) || dk_client_new(&dk, cfg_str(cfg, "DOCKER_HOST"))) {
		fprintf(stderr, "egress-e2e-driver: %s\n", ap_error_last());
		goto out;
	}
	owner = cfg_str(cfg, "AUTOPATCH_OWNER_ID"); /* no default in the table */
	if (!owner)
		owner = "egress-e2e";
	if (sbx_egress_up(dk, &opts, owner, job, runtime, allow, &eg)) {
		fprintf(stderr, "egress-e2e-driver: %s\n", ap_error_last());
		goto out;
	}
	j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "network", sbx_egress_network(eg));
	cJSON_AddStringToObject(j, "proxy_url", sbx_egress_proxy_url(eg));
	env = cJSON_AddArrayToObject(j, "env");
	for (const char *const *e = sbx_egress_env(eg); *e; e++)
		cJSON_AddItemToArray(env, cJSON_CreateString(*e));
	print_json(j);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "drain", 5) != 0)
			continue;
		denials = sbx_egress_drain_log(eg);
		j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "denials", denials);
		print_json(j);
	}
	denials = sbx_egress_drain_log(eg);
	rc = sbx_egress_down(eg);
	j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "down", rc);
	cJSON_AddNumberToObject(j, "denials", denials);
	print_json(j);
	rc = rc ? 1 : 0;
out:
	dk_client_free(dk);
	cfg_free(cfg);
	free(allow);
	return rc;
}
