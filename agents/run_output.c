/* SPDX-License-Identifier: MIT */
/* agents/run_output.c - a test runner's output made readable (see run_output.h). */
#include "agents/run_output.h"

#include "common/buf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLEAN_CAP (4u << 20) /* bytes of output looked at, from each stream */
#define NAME_MAX_ 40	     /* bytes of a program or module name quoted in advice */

/* ---- cleaning ---- */

/* Length of the escape sequence at s[0] == ESC (within n bytes). */
static size_t escape_len(const unsigned char *s, size_t n)
{
	size_t i = 1;

	if (n < 2)
		return n;
	if (s[1] == '[') { /* CSI: parameters, intermediates, one final byte */
		for (i = 2; i < n && s[i] >= 0x20 && s[i] <= 0x3f; i++)
			;
		for (; i < n && s[i] >= 0x20 && s[i] <= 0x2f; i++)
			;
		return i < n && s[i] >= 0x40 && s[i] <= 0x7e ? i + 1 : i;
	}
	if (s[1] == ']' || s[1] == 'P' || s[1] == '_' || s[1] == '^') { /* OSC, DCS, ...: to ST */
		for (i = 2; i < n; i++) {
			if (s[i] == 0x07)
				return i + 1;
			if (s[i] == 0x1b && i + 1 < n && s[i + 1] == '\\')
				return i + 2;
		}
		return n;
	}
	for (i = 1; i < n && s[i] >= 0x20 && s[i] <= 0x2f; i++) /* ESC ( B and the like */
		;
	return i < n ? i + 1 : n;
}

char *run_output_clean(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	ap_buf b = AP_BUF_INIT(CLEAN_CAP + 1);
	size_t line_start = 0;
	char *out;

	if (n > CLEAN_CAP)
		n = CLEAN_CAP;
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];

		if (c == 0x1b) {
			i += escape_len(p + i, n - i);
		} else if (c == '\r') {
			if (i + 1 < n && p[i + 1] == '\n') {
				i++;
				continue;
			}
			ap_buf_truncate(&b, line_start); /* overwritten, as on a terminal */
			i++;
		} else if (c == '\n') {
			ap_buf_add(&b, "\n", 1);
			line_start = b.len;
			i++;
		} else if (c == '\t' || (c >= 0x20 && c != 0x7f)) {
			ap_buf_add(&b, p + i, 1);
			i++;
		} else {
			i++;
		}
	}
	out = ap_utf8_clean_dup(b.data ? b.data : "", b.len);
	ap_buf_release(&b);
	return out;
}

/* ---- error lines ---- */

static bool starts(const char *l, const char *prefix)
{
	return strncmp(l, prefix, strlen(prefix)) == 0;
}

/* Maven's advice lines, which say nothing about this failure. */
static bool maven_noise(const char *l)
{
	static const char *const noise[] = {"-> [Help",
					    "To see the full stack trace",
					    "Re-run Maven using",
					    "For more information about",
					    "[Help ",
					    "After correcting the problems",
					    NULL};
	const char *r = l + strlen("[ERROR]");

	while (*r == ' ')
		r++;
	if (!*r)
		return true;
	for (const char *const *n = noise; *n; n++)
		if (starts(r, *n))
			return true;
	return false;
}

/* Whether the (left-trimmed) line is one of a runner's own error lines. */
static bool error_line(const char *l)
{
	static const char *const prefixes[] = {"ERROR:",
					       "ERROR ",
					       "error:",
					       "error[",
					       "Error:",
					       "FAILED",
					       "FAIL:",
					       "FAIL ",
					       "--- FAIL",
					       "panic:",
					       "fatal:",
					       "Fatal error",
					       "npm ERR!",
					       "npm error",
					       "E   ",
					       "FAILURE:",
					       "CMake Error",
					       "make: ***",
					       "ModuleNotFoundError",
					       "ImportError",
					       "SyntaxError",
					       "Caused by:",
					       "Exception in thread",
					       "error TS",
					       "Could not ",
					       "BUILD FAILURE",
					       "BUILD FAILED",
					       "Test failed",
					       "Error ",
					       "thread '",
					       NULL};
	static const char *const inside[] = {": error:",
					     ": fatal error:",
					     "] ERROR",
					     " panicked at ",
					     "command not found",
					     ": not found",
					     "Error: Cannot find",
					     "No such file or directory",
					     "undefined reference",
					     "] BUILD FAILURE",
					     NULL};

	if (starts(l, "[ERROR]"))
		return !maven_noise(l);
	for (const char *const *p = prefixes; *p; p++)
		if (starts(l, *p))
			return !(starts(l, "thread '") && !strstr(l, "panicked"));
	for (const char *const *p = inside; *p; p++)
		if (strstr(l, *p))
			return true;
	return false;
}

/* The excerpt being built. */
struct pick {
	ap_buf b;
	int lines, max_lines;
	size_t max_bytes;
};

/* Add one line (cut to RUN_OUTPUT_LINE_CAP), unless it is already there or the excerpt is
 * full. */
static void add_line(struct pick *k, const char *l, size_t n)
{
	char line[RUN_OUTPUT_LINE_CAP + 4];
	size_t cut = n > RUN_OUTPUT_LINE_CAP ? ap_utf8_cut(l, RUN_OUTPUT_LINE_CAP) : n;

	if (k->lines >= k->max_lines)
		return;
	memcpy(line, l, cut);
	if (cut < n)
		memcpy(line + cut, "...", 3), cut += 3;
	line[cut] = '\0';
	/* A repeat (Maven prints the same error per module) is shown once. */
	const char *base = ap_buf_str(&k->b);

	for (const char *p = base; cut > 0 && (p = strstr(p, line)) != NULL; p += cut)
		if ((p == base || p[-1] == '\n') && p[cut] == '\n')
			return;
	if (k->b.len + cut + 1 > k->max_bytes)
		return;
	ap_buf_add(&k->b, line, cut);
	ap_buf_add(&k->b, "\n", 1);
	k->lines++;
}

/* Pick the error lines of a cleaned text. */
static void pick_errors(struct pick *k, const char *text)
{
	const char *tb_tail[2] = {NULL, NULL}; /* a traceback's last two frames */
	size_t tb_n[2] = {0, 0};
	bool traceback = false;
	int gradle = 0; /* lines still to take after Gradle's "* What went wrong:" */

	for (const char *l = text, *next; l && *l; l = next) {
		const char *nl = strchr(l, '\n'), *t = l;
		size_t n = nl ? (size_t)(nl - l) : strlen(l);

		next = nl ? nl + 1 : NULL;
		while (t < l + n && (*t == ' ' || *t == '\t'))
			t++;
		if (t == l + n)
			continue;
		if (traceback) {
			if (t == l) { /* the exception line ends the traceback */
				for (int i = 0; i < 2; i++)
					if (tb_tail[i])
						add_line(k, tb_tail[i], tb_n[i]);
				add_line(k, l, n);
				traceback = false;
			} else {
				tb_tail[0] = tb_tail[1];
				tb_n[0] = tb_n[1];
				tb_tail[1] = l;
				tb_n[1] = n;
			}
			continue;
		}
		if (gradle > 0) {
			if (starts(t, "* ")) {
				gradle = 0;
			} else {
				add_line(k, l, n);
				gradle--;
				continue;
			}
		}
		if (starts(t, "Traceback (most recent call last)")) {
			add_line(k, t, (size_t)(l + n - t));
			traceback = true;
			tb_tail[0] = tb_tail[1] = NULL;
			continue;
		}
		if (starts(t, "* What went wrong:")) {
			add_line(k, t, (size_t)(l + n - t));
			gradle = 3;
			continue;
		}
		char line[RUN_OUTPUT_LINE_CAP + 1];
		size_t m = (size_t)(l + n - t) < RUN_OUTPUT_LINE_CAP ? (size_t)(l + n - t)
								     : RUN_OUTPUT_LINE_CAP;
		memcpy(line, t, m);
		line[m] = '\0';
		if (error_line(line))
			add_line(k, l, n);
	}
}

/* The first and last lines of a cleaned text, with a marker for what was left out. */
static void pick_ends(struct pick *k, const char *text)
{
	int total = 0, head = k->max_lines / 2, i = 0;

	for (const char *p = text; *p; p++)
		total += *p == '\n';
	if (*text && text[strlen(text) - 1] != '\n')
		total++;
	for (const char *l = text, *next; l && *l; l = next, i++) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);

		next = nl ? nl + 1 : NULL;
		if (total <= k->max_lines || i < head || i >= total - (k->max_lines - head - 1)) {
			add_line(k, l, n);
		} else if (i == head) {
			char mark[64];
			int m = snprintf(mark, sizeof(mark), "... (%d lines left out) ...",
					 total - k->max_lines + 1);
			add_line(k, mark, (size_t)m);
		}
	}
}

char *run_output_excerpt(const char *err, const char *out, int max_lines, size_t max_bytes,
			 bool *errors)
{
	const char *src[2] = {err, out};
	char *clean[2] = {NULL, NULL}, *res = NULL;
	struct pick k = {
	    .b = AP_BUF_INIT(max_bytes + 1), .max_lines = max_lines, .max_bytes = max_bytes};

	*errors = false;
	for (int i = 0; i < 2; i++)
		if (!(clean[i] = run_output_clean(src[i], src[i] ? strlen(src[i]) : 0)))
			goto out;
	for (int i = 0; i < 2; i++)
		pick_errors(&k, clean[i]);
	*errors = k.lines > 0;
	if (!*errors)
		pick_ends(&k, *clean[0] ? clean[0] : clean[1]);
	while (k.b.len && k.b.data[k.b.len - 1] == '\n')
		ap_buf_truncate(&k.b, k.b.len - 1);
	res = strndup(k.b.data ? k.b.data : "", k.b.len);
out:
	free(clean[0]);
	free(clean[1]);
	ap_buf_release(&k.b);
	return res;
}

/* ---- advice ---- */

/* Whether text has any of the needles. */
static bool any(const char *text, const char *const *needles)
{
	for (; *needles; needles++)
		if (strstr(text, *needles))
			return true;
	return false;
}

/* A package manager that could not fetch what the run needs, and what to say. */
static const struct {
	const char *tool;
	const char *needles[8];
	const char *fetch; /* a setup: command that fetches it */
	const char *where; /* where the fetched things are kept */
} fetchers[] = {
    {"Maven",
     {"Could not transfer artifact", "Could not resolve dependencies", "could not be resolved",
      "Non-resolvable parent POM", "Failed to read artifact descriptor", "Cannot access central",
      NULL},
     "mvn -B dependency:go-offline test-compile",
     "~/.m2"},
    {"Gradle",
     {"Could not resolve all", "Could not GET", "Could not download", "Could not resolve plugin",
      "Could not resolve com.", "Could not resolve org.", NULL},
     "./gradlew --no-daemon testClasses",
     "~/.gradle"},
    {"npm",
     {"npm ERR! code ENOTFOUND", "npm ERR! code EAI_AGAIN", "npm ERR! network",
      "npm error code ENOTFOUND", "npm error code EAI_AGAIN", "npm error network", NULL},
     "npm ci",
     "node_modules"},
    {"pip",
     {"Could not find a version that satisfies", "No matching distribution found",
      "Failed to establish a new connection", NULL},
     "pip install -e . (or -r requirements.txt)",
     "the environment"},
    {"cargo",
     {"failed to get `", "failed to download", "failed to load source for dependency",
      "failed to update registry", "no matching package named", NULL},
     "cargo fetch",
     "~/.cargo"},
    {"go",
     {"go: downloading", "missing go.sum entry", "cannot find module providing package",
      "GOPROXY=off", "go: module lookup disabled", NULL},
     "go mod download",
     "~/go"},
};

/* The flavour (docs/environments.md) whose image has program, or NULL. */
static const char *flavour_of(const char *p)
{
	static const struct {
		const char *flavour;
		const char *programs[12];
	} map[] = {
	    {"python",
	     {"python", "python3", "pytest", "py.test", "pip", "pip3", "tox", "nox", NULL}},
	    {"node", {"node", "nodejs", "npm", "npx", NULL}},
	    {"go", {"go", "gofmt", NULL}},
	    {"rust", {"cargo", "rustc", NULL}},
	    {"java", {"mvn", "gradle", "java", "javac", NULL}},
	    {"c", {"cmake", "ctest", "gcc", "cc", "g++", "c++", "make", "pkg-config", NULL}},
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		for (const char *const *q = map[i].programs; *q; q++)
			if (strcmp(p, *q) == 0)
				return map[i].flavour;
	return NULL;
}

/* The program of "sh: 1: NAME: not found" or "NAME: command not found", in name. */
static bool missing_program(const char *text, char *name, size_t cap)
{
	static const char *const tails[] = {": command not found", ": not found", NULL};

	for (const char *const *t = tails; *t; t++) {
		const char *hit = strstr(text, *t), *start;

		if (!hit)
			continue;
		start = hit;
		while (start > text && start[-1] != ' ' && start[-1] != '\n' && start[-1] != ':' &&
		       (size_t)(hit - start) < cap - 1)
			start--;
		if (hit == start || (size_t)(hit - start) >= cap)
			continue;
		memcpy(name, start, (size_t)(hit - start));
		name[hit - start] = '\0';
		for (char *c = name; *c; c++)
			if (!isalnum((unsigned char)*c) && !strchr("._+-/", *c))
				return false;
		return true;
	}
	return false;
}

/* The module of "ModuleNotFoundError: No module named 'x'", in name. */
static bool missing_module(const char *text, char *name, size_t cap)
{
	const char *hit = strstr(text, "No module named '");
	size_t n;

	if (!hit)
		return false;
	hit += strlen("No module named '");
	n = strcspn(hit, "'\n");
	if (n == 0 || n >= cap || hit[n] != '\'')
		return false;
	memcpy(name, hit, n);
	name[n] = '\0';
	for (char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("._", *c))
			return false;
	return true;
}

static char *advise(const char *text)
{
	static const char *const offline[] = {"Temporary failure in name resolution",
					      "Name or service not known",
					      "Network is unreachable",
					      "Could not resolve host",
					      "getaddrinfo",
					      "UnknownHostException",
					      "No address associated",
					      NULL};
	char name[NAME_MAX_ + 1], *s = NULL;
	const char *fl;

	for (size_t i = 0; i < sizeof(fetchers) / sizeof(fetchers[0]); i++)
		if (any(text, fetchers[i].needles))
			return asprintf(
				   &s,
				   "%s could not fetch what the run needs: the Tester's box has "
				   "no network. Fetch it in `setup:` in .github/autopatch.yml "
				   "(e.g. `%s`), with the host it downloads from listed under "
				   "`network:` (as host:443); the Tester's runs then use what "
				   "setup "
				   "left in %s.",
				   fetchers[i].tool, fetchers[i].fetch, fetchers[i].where) < 0
				   ? NULL
				   : s;
	if (missing_program(text, name, sizeof(name))) {
		fl = flavour_of(name);
		if (fl)
			return asprintf(
				   &s,
				   "`%s` is not in the sandbox image: the `%s` flavour has it. "
				   "Set `image: %s` in .github/autopatch.yml (or install it in "
				   "`setup:`).",
				   name, fl, fl) < 0
				   ? NULL
				   : s;
		return asprintf(&s,
				"`%s` is not in the sandbox image: install it in `setup:` in "
				".github/autopatch.yml (with its host under `network:`), or use an "
				"image that has it (`image:`).",
				name) < 0
			   ? NULL
			   : s;
	}
	if (missing_module(text, name, sizeof(name)))
		return asprintf(
			   &s,
			   "The Python module `%s` is not installed: install the project and "
			   "its test dependencies in `setup:` in .github/autopatch.yml (e.g. `pip "
			   "install -e .`, with the package index's host under `network:`).",
			   name) < 0
			   ? NULL
			   : s;
	if (any(text, offline))
		return strdup(
		    "The run tried to reach the network, which the Tester's box does not "
		    "have: fetch what it needs in `setup:` in .github/autopatch.yml (with "
		    "its host under `network:`), or use an image that has it.");
	return NULL;
}

/* tox that could not build an environment offline (pip's error may be on one stream, tox's
 * own lines on the other): what works without a network, or NULL. */
static char *advise_tox(const char *e, const char *o)
{
	static const char *const tox[] = {"evaluation failed :(", " install_deps> ",
					  " install_package> ", ".pkg: ", NULL};
	const char *const *pip = NULL;

	for (size_t i = 0; i < sizeof(fetchers) / sizeof(fetchers[0]); i++)
		if (strcmp(fetchers[i].tool, "pip") == 0)
			pip = fetchers[i].needles;
	if (!pip || !(any(e, tox) || any(o, tox)) || !(any(e, pip) || any(o, pip)))
		return NULL;
	return strdup(
	    "tox could not install what its environment needs: the Tester's box has no "
	    "network. tox works offline when tox.ini's test environment has "
	    "`skip_install = true` and needs nothing beyond the image (`sitepackages = "
	    "true` makes the image's pytest serve `deps = pytest`); a project tox "
	    "packages needs `PIP_NO_INDEX=1 PIP_FIND_LINKS=/usr/share/python-wheels` "
	    "before `tox` in the test command (Debian's setuptools wheel). Otherwise list "
	    "the package index's host under `network:` in .github/autopatch.yml.");
}

char *run_output_advice(const char *err, const char *out)
{
	char *e = run_output_clean(err, err ? strlen(err) : 0);
	char *o = run_output_clean(out, out ? strlen(out) : 0);
	char *s = NULL;

	if (e && o && (s = advise_tox(e, o)) != NULL) {
		free(e);
		free(o);
		return s;
	}
	if (e && o) {
		s = advise(e);
		if (!s)
			s = advise(o);
	}
	free(e);
	free(o);
	return s;
}
