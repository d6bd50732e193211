/* SPDX-License-Identifier: MIT */
/* cli/cache.c - `autopatch cache list|clear [--repo ID]`: the per-repository environment
 * cache (job/environment.h, docs/environments.md). Lists what is kept, most recently used
 * first; clear removes all entries or one repository's. */
#include "cli/commands.h"
#include "common/err.h"
#include "job/env_cache.h"
#include "job/environment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
	fprintf(stderr, "usage: autopatch cache list\n"
			"       autopatch cache clear [--repo OWNER/NAME | --repo local:PATH]\n");
}

static int list(const ap_config *cfg)
{
	env_cache_entry *v = NULL;
	size_t n = 0;
	int64_t total = 0;

	if (env_cache_list(cfg, &v, &n) != 0) {
		fprintf(stderr, "autopatch cache: %s\n", ap_error_last());
		return 1;
	}
	if (n)
		printf("%-40s %-14s %10s %8s  %-19s  %s\n", "repository", "key", "size", "setup",
		       "last used", "image");
	for (size_t i = 0; i < n; i++) {
		char when[32];
		time_t t = (time_t)v[i].used_s;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		printf("%-40s %-14.12s %8.1fMB %7.1fs  %-19s  %s\n", v[i].repo, v[i].key,
		       (double)v[i].bytes / 1e6, (double)v[i].setup_ms / 1000, when, v[i].image);
		total += v[i].bytes;
	}
	printf("%zu environment%s, %.1f MB\n", n, n == 1 ? "" : "s", (double)total / 1e6);
	free(v);
	return 0;
}

int cache_main(int argc, char **argv, ap_config *cfg)
{
	const char *repo = NULL;
	size_t removed = 0;

	if (argc < 2) {
		usage();
		return 2;
	}
	if (strcmp(argv[1], "list") == 0 && argc == 2)
		return list(cfg);
	if (strcmp(argv[1], "clear") != 0) {
		usage();
		return 2;
	}
	if (argc == 4 && strcmp(argv[2], "--repo") == 0)
		repo = argv[3];
	else if (argc != 2) {
		usage();
		return 2;
	}
	if (env_cache_clear(cfg, repo, &removed) != 0) {
		fprintf(stderr, "autopatch cache: %s\n", ap_error_last());
		return 1;
	}
	printf("removed %zu environment%s\n", removed, removed == 1 ? "" : "s");
	return 0;
}
