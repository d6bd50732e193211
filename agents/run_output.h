/* SPDX-License-Identifier: MIT */
/* agents/run_output.h - a test runner's output made readable for a person.
 *
 * When the suite cannot run on the unchanged code, the Tester tells the repository's people
 * why (agents/tester.c, the "environment failure"). Raw output is often useless there: Maven's
 * first lines are ANSI colour codes and download progress, and the one line that says what
 * went wrong ("[ERROR] Plugin ... could not be resolved") comes hundreds of lines later. This
 * module cleans the output, picks the runner's own error lines over the first lines, and
 * gives advice that fits the cause (a package that could not be fetched offline, a program
 * the image lacks, a Python module that is not installed).
 *
 * Everything here is untrusted text from the sandbox: every result is bounded, valid UTF-8
 * without control characters other than newline and tab.
 */
#ifndef AP_RUN_OUTPUT_H
#define AP_RUN_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#define RUN_OUTPUT_LINE_CAP 300 /* bytes of one line shown; longer ones are cut with "..." */

/* s[0..n) without ANSI escape sequences (CSI, OSC, two- and three-byte escapes), with a
 * carriage return that is not part of CRLF treated as a terminal would (the line is
 * overwritten: only what follows it is kept), other control characters but newline and tab
 * dropped and invalid UTF-8 replaced. malloc'd; NULL on ENOMEM. */
char *run_output_clean(const char *s, size_t n);

/* The excerpt of a failed run's output to show, from stderr then stdout (either may be NULL):
 * the runner's own error lines ("[ERROR]", "error:", "error[E...", "FAILED", "panic:",
 * "Traceback" with its exception line, "npm ERR!", Gradle's "What went wrong", ...) in order,
 * without repeats and without Maven's boilerplate, when there are any (*errors = true); else
 * its first and last lines (*errors = false). Cleaned as by run_output_clean(), at most
 * max_lines lines of at most RUN_OUTPUT_LINE_CAP bytes each and max_bytes in all. malloc'd,
 * "" when the output is empty; NULL on ENOMEM. */
char *run_output_excerpt(const char *err, const char *out, int max_lines, size_t max_bytes,
			 bool *errors);

/* One or two sentences of advice that fit the cause seen in the output, naming what to
 * change in .github/autopatch.yml: a package manager (Maven, Gradle, npm, pip, cargo, go)
 * that could not fetch offline -> fetch it in `setup:` with its host under `network:`; a
 * program not found -> the flavour (`image:`) that has it; a Python module not installed ->
 * install it in `setup:`. malloc'd; NULL when no cause is recognised (the caller gives its
 * general advice) or on ENOMEM. */
char *run_output_advice(const char *err, const char *out);

#endif
