/* SPDX-License-Identifier: MIT */
/* agents/testcmd.c - test command detection (see testcmd.h). */
#include "agents/testcmd.h"
#include "common/buf.h"
#include "common/err.h"

#include <dirent.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PEEK_CAP (256u << 10)

static bool exists(const char *dir, const char *name, bool want_dir)
{
	char p[4096];
	struct stat st;
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return false;
	if (stat(p, &st) != 0)
		return false;
	return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

/* True when dir (not recursive beyond depth) holds a file matching one of the globs. */
static bool has_match(const char *dir, const char *const *globs, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;
	if (!d)
		return false;
	while (!found && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		for (const char *const *g = globs; *g && !found; g++)
			if (fnmatch(*g, e->d_name, 0) == 0)
				found = true;
		if (!found && depth > 0) {
			char sub[4096];
			struct stat st;
			if (snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) <
				(int)sizeof(sub) &&
			    stat(sub, &st) == 0 && S_ISDIR(st.st_mode))
				found = has_match(sub, globs, depth - 1);
		}
	}
	closedir(d);
	return found;
}

/* Read up to PEEK_CAP bytes of a file into b. */
static int peek(const char *dir, const char *name, ap_buf *b)
{
	char p[4096], chunk[4096];
	size_t n;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "r");
	if (!f)
		return AP_EIO;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (ap_buf_add(b, chunk, n) != 0)
			break;
	fclose(f);
	return 0;
}

static bool make_has_test(const char *dir)
{
	ap_buf b = AP_BUF_INIT(PEEK_CAP);
	bool yes = false;
	const char *names[] = {"Makefile", "makefile", "GNUmakefile"};
	for (size_t i = 0; i < 3 && !yes; i++) {
		ap_buf_reset(&b);
		if (peek(dir, names[i], &b) != 0)
			continue;
		const char *s = ap_buf_str(&b);
		yes = strncmp(s, "test:", 5) == 0 || strstr(s, "\ntest:") != NULL;
	}
	ap_buf_release(&b);
	return yes;
}

int testcmd_detect(const char *dir, char **out)
{
	static const char *const py_tests[] = {"test_*.py", "*_test.py", NULL};
	static const char *const py_cfg[] = {"pytest.ini", "conftest.py", "tox.ini", NULL};
	const char *cmd = NULL;
	ap_buf b = AP_BUF_INIT(PEEK_CAP);

	char sub[4096];
	snprintf(sub, sizeof(sub), "%s/tests", dir);
	bool py = has_match(sub, py_tests, 2);
	snprintf(sub, sizeof(sub), "%s/test", dir);
	py = py || has_match(sub, py_tests, 2) || has_match(dir, py_tests, 0) ||
	     has_match(dir, py_cfg, 0);
	if (!py && peek(dir, "pyproject.toml", &b) == 0)
		py = strstr(ap_buf_str(&b), "[tool.pytest") != NULL;
	if (py) {
		cmd = "python3 -m pytest -q";
	} else if (ap_buf_reset(&b),
		   peek(dir, "package.json", &b) == 0 && strstr(ap_buf_str(&b), "\"test\"")) {
		cmd = "npm test";
	} else if (exists(dir, "Cargo.toml", false)) {
		cmd = "cargo test";
	} else if (exists(dir, "go.mod", false)) {
		cmd = "go test ./...";
	} else if (make_has_test(dir)) {
		cmd = "make test";
	}
	ap_buf_release(&b);
	if (!cmd)
		return ap_error_set(
		    AP_ENOTFOUND, "cannot tell how to run this repository's tests: pass --test CMD "
				  "(or set test: in .github/autopatch.yml)");
	*out = strdup(cmd);
	return *out ? 0 : AP_ENOMEM;
}
