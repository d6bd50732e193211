/* SPDX-License-Identifier: MIT */
/* tests/github/gh_test_util.h - fixtures for the github/ unit tests: a temporary directory,
 * an RSA key made with `openssl genrsa`, and the GitHub stand-in (standins/github_stub.py)
 * running as a child process. */
#ifndef AP_GH_TEST_UTIL_H
#define AP_GH_TEST_UTIL_H

#include <stddef.h>
#include <sys/types.h>

typedef struct gh_stub {
	pid_t pid;
	char url[128]; /* http://127.0.0.1:PORT */
	char dir[256]; /* temporary directory (removed by gh_stub_stop) */
	char key[300]; /* private key PEM path */
	char pub[300]; /* public key PEM path */
	char app_id[16];
} gh_stub;

/* Make the temp dir and key, start the stub. Returns 0 or -1 (message on stderr). */
int gh_stub_start(gh_stub *s);

/* Kill the stub and remove the temp dir. */
void gh_stub_stop(gh_stub *s);

/* HTTP to the stub's control endpoints. Returns the HTTP status, or -1; *body (if not NULL)
 * is the malloc'd answer. */
long gh_stub_http(const gh_stub *s, const char *method, const char *path, const char *json,
		  char **body);

/* Run a shell command (fixed strings from the test only) and return its exit status;
 * *out (if not NULL) gets its stdout, malloc'd. */
int gh_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Count the stub's recorded requests whose method matches and path contains needle. */
int gh_stub_count(const gh_stub *s, const char *method, const char *needle);

#endif
