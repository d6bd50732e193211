/* SPDX-License-Identifier: MIT */
/* github/creds.h - what the REST client needs from whoever holds the App's credentials.
 *
 * gh_rest (github/rest.c) authenticates through this small table instead of calling the App
 * module by name, so the App (github/app.c, which itself uses gh_rest to mint installation
 * tokens) and the REST client do not include each other. gh_app_creds() returns the App's
 * table; tests may supply their own.
 */
#ifndef AP_GH_CREDS_H
#define AP_GH_CREDS_H

#include <stdint.h>

typedef struct gh_creds {
	void *ud;	     /* passed to every function */
	const char *api_url; /* the REST base, e.g. https://api.github.com (no trailing slash) */
	/* A malloc'd bearer token (caller wipes and frees): the App's JWT when installation_id is
	 * 0, else an installation token. Returns 0 or a negative error with a message. */
	int (*token)(void *ud, int64_t installation_id, char **out);
	/* Seconds since the installation's cached token was minted, -1 when none is cached. */
	int64_t (*token_age)(void *ud, int64_t installation_id);
	/* Drop the installation's cached token: GitHub rejected it. */
	void (*invalidate)(void *ud, int64_t installation_id);
	/* GitHub's clock (Unix seconds, from a Date header) after a JWT was refused for skew. */
	void (*set_server_time)(void *ud, int64_t server_now);
} gh_creds;

#endif
