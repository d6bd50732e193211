/* SPDX-License-Identifier: MIT */
/* cli/settings.c - `autopatch settings [--json]`: every setting autopatch reads, with its kind,
 * default and one-line description, straight from the table in common/config.c. Prints no
 * configured value (some are secrets). tests/e2e/test_settings_documented.py checks
 * .env.example against the --json form. */
#include "cli/commands.h"
#include "common/config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] = "usage: autopatch settings [--json]\n";

static const char *kind_name(enum cfg_kind k)
{
	switch (k) {
	case CFG_STR:
		return "string";
	case CFG_INT:
		return "int";
	case CFG_BYTES:
		return "bytes";
	case CFG_BOOL:
		return "bool";
	}
	return "?";
}

/* The table as a JSON array of {name, kind, default (null: none), secret, secret_file,
 * env_only, doc};
 * NULL when out of memory. Freed with cJSON_Delete(). */
static cJSON *settings_json(void)
{
	size_t n;
	const cfg_setting *s = cfg_settings(&n);
	cJSON *arr = cJSON_CreateArray();

	if (!arr)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		unsigned f = s[i].flags;

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			goto err_free_array;
		}
		if (!cJSON_AddStringToObject(o, "name", s[i].name) ||
		    !cJSON_AddStringToObject(o, "kind", kind_name(s[i].kind)) ||
		    !(s[i].def ? cJSON_AddStringToObject(o, "default", s[i].def)
			       : cJSON_AddNullToObject(o, "default")) ||
		    !cJSON_AddBoolToObject(o, "secret", (f & CFG_SECRET) != 0) ||
		    !cJSON_AddBoolToObject(o, "secret_file", (f & CFG_SECRET_FILE) != 0) ||
		    !cJSON_AddBoolToObject(o, "env_only", (f & CFG_ENV_ONLY) != 0) ||
		    !cJSON_AddStringToObject(o, "doc", s[i].doc))
			goto err_free_array;
	}
	return arr;
err_free_array:
	cJSON_Delete(arr);
	return NULL;
}

int settings_main(int argc, char **argv, ap_config *cfg)
{
	bool json = argc == 2 && strcmp(argv[1], "--json") == 0;
	size_t n;
	const cfg_setting *s = cfg_settings(&n);
	cJSON *arr;
	char *text;

	(void)cfg;
	if (argc > 2 || (argc == 2 && !json)) {
		fputs(usage, stderr);
		return 2;
	}
	if (!json) {
		for (size_t i = 0; i < n; i++)
			printf("%-34s %-7s %-24s %s\n", s[i].name, kind_name(s[i].kind),
			       s[i].def ? s[i].def : "-", s[i].doc);
		return 0;
	}
	arr = settings_json();
	text = arr ? cJSON_Print(arr) : NULL;
	cJSON_Delete(arr);
	if (!text) {
		fprintf(stderr, "autopatch: out of memory\n");
		return 1;
	}
	puts(text);
	free(text);
	return 0;
}
