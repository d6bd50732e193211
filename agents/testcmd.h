/* SPDX-License-Identifier: MIT */
/* agents/testcmd.h - the one test-command detector: how to run a repository's tests when
 * nobody said so.
 *
 * Both front ends call it, so one repository gets one command whichever way it is fixed: the
 * pipeline through repo_config_load() (job/repo_config.c) when .github/autopatch.yml has no
 * `test:`, and `autopatch fix` when neither --test nor `test:` is given. An explicit command
 * (the file's `test:`, fix's --test) always wins; the caller handles that.
 *
 * It decides from files in the host checkout only: nothing in the repository is executed.
 * The checkout is untrusted, so every file is opened beneath the checkout through no symbolic
 * link in any component (common/beneath.h: openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or a
 * component walk), only regular files are read, and a file larger than TESTCMD_FILE_CAP is
 * ignored.
 *
 * Precedence, first match wins:
 *   1. AGENTS.md, CONTRIBUTING.md, .github/CONTRIBUTING.md, docs/CONTRIBUTING.md: a command
 *      documented under a heading that mentions tests ("## Testing", "### Running the
 *      tests"): a fenced shell block holding exactly one command, or an inline `code` span.
 *      Accepted only when it is one simple command (no ; & | < > $ ` or backslash) whose first
 *      word is a known runner (pytest, tox, ctest, ...) or a general tool (make, npm, go,
 *      cargo, python3, ...) given a test-like argument (test*, check, verify).
 *   2. GNUmakefile / makefile / Makefile (the one make would read) with a `test:` target ->
 *      "make test", else with a `check:` target -> "make check".
 *   3. CMakeLists.txt calling enable_testing(), add_test() or include(CTest) -> configure,
 *      build and run ctest in build-autopatch/ (a directory the Tester removes after a run).
 *   4. pytest configuration: pytest.ini, pyproject.toml [tool.pytest...], tox.ini [pytest],
 *      setup.cfg [tool:pytest], conftest.py -> "python3 -m pytest -q".
 *   5. package.json with a scripts.test other than npm's placeholder ("echo \"Error: no test
 *      specified\" && exit 1") -> "npm test".
 *   6. go.mod -> "go test ./...".
 *   7. Cargo.toml -> "cargo test".
 *   8. test_*.py or *_test.py files at the top, or up to two levels into tests/ or test/ ->
 *      "python3 -m pytest -q".
 *
 * Why this order: from the most deliberate statement of "this is how our tests run" to the
 * weakest guess. Words the maintainers wrote for contributors come first. A build-system
 * entry point (a make target, CMake's tests) is next because it is written for exactly this
 * purpose, usually does what a bare runner cannot (build first, set PYTHONPATH, run every
 * language's tests of a mixed repository) and was already the pipeline's first choice, so
 * no repository served before changes command. Then a runner's own configuration, then a
 * language manifest whose tool has a built-in runner, then file names alone.
 */
#ifndef AP_TESTCMD_H
#define AP_TESTCMD_H

#include <stdbool.h>

#define TESTCMD_FILE_CAP (256 * 1024) /* bytes; a larger file is ignored */
#define TESTCMD_MAX_CMD	 200	      /* bytes of a documented command */

/* Detect the test command of the checkout at repo_dir. On success *cmd is the shell command
 * (run from the repository root) and *why names what decided it, short enough to show after
 * the command: "Makefile target test", "pytest.ini", "AGENTS.md section \"Testing\"",
 * "package.json scripts.test". Both are malloc'd and owned by the caller; both are NULL on
 * failure. Returns 0; AP_ENOTFOUND when nothing matched, with a message that starts "no test
 * command detected" and lists what was looked for (callers add how to set one); AP_EIO when
 * repo_dir cannot be opened; AP_ENOMEM. */
int testcmd_detect(char **cmd, char **why, const char *repo_dir);

/* Whether line is a documented command rule 1 above accepts (exposed for unit tests). */
bool testcmd_is_runner(const char *line);

#endif
