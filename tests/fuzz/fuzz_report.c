/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_report.c - everything the Tester reads back from a box is outside data: the
 * first byte picks a parser (JUnit XML, go test -json, cargo's per-test lines, jest's JSON, the
 * stop-at-first-failure markers and a `&&` chain of test commands with a test name matched
 * against a JUnit report, the read-back sections), the rest is its input. No crash, no leak,
 * no read past the end; every entry has a non-empty id within REPORT_MAX_ID and a message
 * within REPORT_MAX_MESSAGE (+ "..."), and the merged report is sorted and free of
 * duplicates. */
#include "agents/report.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(report *r)
{
	report_counts c;

	report_finish(r);
	for (size_t i = 0; i < r->n; i++) {
		const report_test *t = &r->tests[i];

		if (!t->id || !*t->id || strlen(t->id) > REPORT_MAX_ID)
			abort();
		if (t->message && strlen(t->message) > REPORT_MAX_MESSAGE + 3)
			abort();
		if (t->outcome > REPORT_FAILED)
			abort();
		if (i && strcmp(r->tests[i - 1].id, t->id) >= 0)
			abort();
		if (report_find(r, t->id) != t)
			abort();
	}
	report_count(r, &c);
	if (c.passed + c.failed + c.errors + c.skipped != r->n || c.collection > c.errors)
		abort();
	report_run run = {.exit_code = r->n ? 1 : 127, .have_report = true, .report = r};
	if (!report_class_name(report_classify(&run)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	report r = REPORT_INIT;
	const char *text;
	size_t len;
	/* A copy without the terminating NUL, so a read past the end is caught. */
	char *buf;

	if (size < 1)
		return 0;
	len = size - 1;
	buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);
	text = buf;
	switch (data[0] % 6) {
	case 0:
		report_parse_junit(&r, text, len);
		break;
	case 1:
		report_parse_go_json(&r, text, len);
		break;
	case 2:
		report_parse_cargo(&r, text, len);
		break;
	case 4:
		report_parse_jest(&r, text, len);
		break;
	case 5: { /* a JUnit report, then every line of the input as a test name */
		const char *nl = memchr(text, '\n', len);
		size_t head = nl ? (size_t)(nl - text) : len;
		const report_test *m[4];
		bool amb;

		(void)report_stopped_early(text, len, head & 1);
		report_parse_junit(&r, text, len);
		report_finish(&r);
		char *name = strndup(text, head);
		if (name) {
			(void)report_chain_stops(name); /* the line as a test command */
			size_t n = report_match(&r, name, m, 4, &amb);
			for (size_t i = 0; i < n && i < 4; i++)
				if (!report_find(&r, m[i]->id))
					abort();
			if (amb && n < 2)
				abort();
			free(name);
		}
		break;
	}
	default: {
		report_section s[8];
		size_t n = 0;

		if (report_sections(text, len, "N0NCE", s, 8, &n) == 0)
			for (size_t i = 0; i < n; i++)
				if (s[i].data < text || s[i].data + s[i].len > text + len ||
				    s[i].name + s[i].name_len > text + len)
					abort();
	}
	}
	check(&r);
	report_release(&r);
	free(buf);
	return 0;
}
