/* SPDX-License-Identifier: MIT */
/* agents/testcmd.h - detect a repository's test command when none is configured.
 *
 * Used by `autopatch fix` (without --test) and by the pipeline (no `test:` in
 * .github/autopatch.yml). Looks at the host checkout only (file names, and a Makefile's or
 * package.json's test target); nothing in the repository is executed.
 */
#ifndef AP_TESTCMD_H
#define AP_TESTCMD_H

/* Return a malloc'd shell command run from the repository root: "python3 -m pytest -q" when
 * there is a tests/ or test/ directory with Python tests, test_*.py / *_test.py files at the
 * top, or pytest configuration; "npm test" for a package.json with a test script; "cargo test";
 * "go test ./..."; "make test" for a Makefile with a test target. AP_ENOTFOUND (with a sentence
 * asking for --test or `test:`) when nothing matches. */
int testcmd_detect(const char *repo_dir, char **out);

#endif
