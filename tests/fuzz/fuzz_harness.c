/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_harness.c - the test-harness detector (agents/harness.c) on arbitrary
 * contents, paths and commands. The first byte picks the path (one of the content rules' file
 * names, or the input's own) and the status; the rest is split at \x01 into old contents, new
 * contents, the test command and a path. No crash, no leak, no read past the end, and:
 *   - the verdict is deterministic;
 *   - it is symmetric: swapping old and new names the same (path, rule) pairs;
 *   - an unchanged file is judged by its path alone (as if both sides were empty);
 *   - a file's verdict does not depend on the other files of the patch;
 *   - an unreadable side of a content rule's file is harness (fails closed);
 *   - the rendered text never holds a raw control byte from a path. */
#include "agents/harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
    "setup.cfg",    "pyproject.toml",	"Cargo.toml",		"package.json",	 "pom.xml",
    "build.gradle", "requirements.txt", "app/build.gradle.kts", "sub/setup.cfg", "web/package.json",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* (path, rule) pairs of a result, for comparison. */
static bool same_pairs(const harness_findings *a, const harness_findings *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->items[i].rule != b->items[i].rule ||
		    strcmp(a->items[i].path, b->items[i].path) != 0)
			return false;
	return true;
}

static void classify(harness_findings *out, const harness_file *f, size_t n, const char *cmd)
{
	harness_findings_release(out);
	if (harness_classify(out, f, n, cmd, "sh setup.sh") != 0)
		abort();
}

static bool content_rule(const harness_rule *r)
{
	static const char *const content[] = {"setup-cfg",	    "pyproject", "cargo-toml",
					      "package-json",	    "maven-pom", "gradle-script",
					      "python-requirements"};

	for (size_t i = 0; i < sizeof(content) / sizeof(content[0]); i++)
		if (strcmp(r->name, content[i]) == 0)
			return true;
	return false;
}

static void check_text(const harness_findings *f)
{
	char *md = NULL, *line = NULL;

	if (harness_findings_markdown(f, 1, &md) != 0 || harness_findings_reason(f, 0, &line) != 0)
		abort();
	for (const char *p = md; p && *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\n')
			abort();
	for (const char *p = line; p && *p; p++)
		if ((unsigned char)*p < 0x20)
			abort();
	if ((f->n == 0) != (line == NULL))
		abort();
	free(md);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *part[4] = {"", "", "", ""};
	size_t len[4] = {0, 0, 0, 0}, k = 0;
	char *buf, *cmd, *own;
	harness_findings a = HARNESS_FINDINGS_INIT, b = HARNESS_FINDINGS_INIT;
	harness_findings c = HARNESS_FINDINGS_INIT;
	harness_file f, g[2];
	const char *path;
	unsigned sel;

	if (size < 1)
		return 0;
	sel = data[0];
	buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	part[0] = buf;
	for (size_t i = 0; i < size - 1; i++) {
		if (buf[i] == '\x01' && k < 3) {
			len[k] = (size_t)(buf + i - part[k]);
			part[++k] = buf + i + 1;
		}
	}
	len[k] = (size_t)(buf + size - 1 - part[k]);
	cmd = strndup(part[2], len[2]);
	own = strndup(part[3], len[3]);
	if (!cmd || !own)
		goto out;
	path = (sel & 0x0f) < NNAMES ? names[sel & 0x0f] : own;
	if (!*path)
		path = "x";

	memset(&f, 0, sizeof(f));
	f.old_path = f.new_path = path;
	f.status = (sel & 0x30) == 0x10 ? 'A' : (sel & 0x30) == 0x20 ? 'D' : 'M';
	if (f.status != 'A') {
		f.old_data = part[0];
		f.old_len = len[0];
	}
	if (f.status != 'D') {
		f.new_data = part[1];
		f.new_len = len[1];
	}

	/* deterministic */
	classify(&a, &f, 1, cmd);
	classify(&b, &f, 1, cmd);
	if (!same_pairs(&a, &b))
		abort();
	for (size_t i = 0; i < a.n; i++)
		if (strcmp(a.items[i].reason, b.items[i].reason) != 0)
			abort();
	check_text(&a);

	/* independent of the other files: with another before it, the verdicts of the two
	 * alone, in order */
	g[0] = (harness_file){"src/x.c", "src/x.c", 'M', "a", 1, "b", 1, false, false};
	g[1] = f;
	classify(&b, g, 1, cmd);
	if (harness_classify(&b, &f, 1, cmd, "sh setup.sh") != 0)
		abort();
	classify(&c, g, 2, cmd);
	if (!same_pairs(&b, &c))
		abort();

	if (f.status == 'M') {
		harness_file s = f, e = f;

		/* symmetric */
		s.old_data = f.new_data;
		s.old_len = f.new_len;
		s.new_data = f.old_data;
		s.new_len = f.old_len;
		classify(&b, &s, 1, cmd);
		if (!same_pairs(&a, &b))
			abort();
		/* unchanged: the path alone */
		s.new_data = s.old_data;
		s.new_len = s.old_len;
		e.old_data = e.new_data = "";
		e.old_len = e.new_len = 0;
		classify(&a, &s, 1, cmd);
		classify(&b, &e, 1, cmd);
		if (!same_pairs(&a, &b))
			abort();
		for (size_t i = 0; i < a.n; i++)
			if (content_rule(a.items[i].rule))
				abort();
		/* unreadable: a content rule's file is harness */
		s = f;
		s.too_big = true;
		s.new_data = NULL;
		classify(&a, &s, 1, cmd);
		if ((sel & 0x0f) < NNAMES && a.n == 0)
			abort();
	}
out:
	harness_findings_release(&a);
	harness_findings_release(&b);
	harness_findings_release(&c);
	free(cmd);
	free(own);
	free(buf);
	return 0;
}
