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
 * Precedence, first match wins (the caller has already looked at .github/autopatch.yml):
 *   1. AGENTS.md, CONTRIBUTING.md, .github/CONTRIBUTING.md, docs/CONTRIBUTING.md: a command
 *      documented under a heading that mentions tests ("## Testing", "### Running the
 *      tests"): a fenced shell block holding exactly one command, or an inline `code` span.
 *      Accepted only when it is one simple command (no ; & | < > $ ` or backslash) whose first
 *      word is a known runner (pytest, tox, ctest, ...) or a general tool (make, npm, go,
 *      cargo, python3, ...) given a test-like argument (test*, check, verify).
 *   2. The CI workflow (.github/workflows/NAME.yml and NAME.yaml, at most TESTCMD_MAX_WORKFLOWS,
 *      names with "test" first, then "ci", then the rest in name order): the `run:` steps of
 *      the job that tests, without install, lint, setup and platform-only steps
 *      (agents/ci_workflow.h says how). The answer names the file, job and steps, and any
 *      matrix value it substituted.
 *   3. tox.ini with [tox] or [testenv]: the `commands` of [testenv] (tox runs each line as a
 *      command; they are joined with &&), else "tox"; noxfile.py -> "nox -s tests" (or the
 *      session named test) when it defines one, else "nox".
 *   4. GNUmakefile / makefile / Makefile (the one make would read) with a `test:` target ->
 *      "make test", else with a `check:` target -> "make check"; then justfile / Justfile /
 *      .justfile with a test (else check) recipe -> "just test".
 *   5. package.json with a scripts.test other than npm's placeholder ("echo \"Error: no test
 *      specified\" && exit 1") -> "npm test".
 *   6. pytest configuration: pytest.ini, pyproject.toml [tool.pytest...], tox.ini [pytest],
 *      setup.cfg [tool:pytest], conftest.py -> "python3 -m pytest -q".
 *   7. go.mod -> "go test ./..."; Cargo.toml -> "cargo test --no-fail-fast".
 *   8. pom.xml -> "mvn -B test"; build.gradle(.kts) or settings.gradle(.kts) -> "./gradlew
 *      test" when the wrapper gradlew is a file of the checkout, else "gradle test".
 *   9. CMakeLists.txt calling enable_testing(), add_test() or include(CTest) -> configure,
 *      build and run ctest in build-autopatch/ (a directory the Tester removes after a run);
 *      meson.build -> "meson setup build-autopatch && meson test -C build-autopatch".
 *  10. test_*.py or *_test.py files at any depth (breadth first, at most TESTCMD_WALK_DEPTH
 *      directory levels and TESTCMD_WALK_ENTRIES entries; hidden directories, node_modules and
 *      virtual environments skipped): "python3 -m pytest -q", naming the first file found.
 *
 * Why this order: from the most deliberate statement of "this is how our tests run" to the
 * weakest guess. Words the maintainers wrote for contributors come first; then what their CI
 * runs on every push, which is known to work; then a test driver's own configuration (tox,
 * nox), a build-system entry point (a make or just target) written for exactly this purpose;
 * then a runner's configuration, a language manifest whose tool has a built-in runner, and
 * file names alone.
 *
 * When nothing matches, the message lists everything looked at: each file present and why it
 * gave no command (a link or an oversized file is named as ignored), then the files absent.
 */
#ifndef AP_TESTCMD_H
#define AP_TESTCMD_H

#include <stdbool.h>
#include <stddef.h>

#define TESTCMD_FILE_CAP      (256 * 1024) /* bytes; a larger file is ignored */
#define TESTCMD_MAX_CMD	      200	   /* bytes of a documented command */
#define TESTCMD_MAX_WORKFLOWS 50	   /* workflow files looked at */
#define TESTCMD_WALK_DEPTH    6		   /* directory levels searched for test files */
#define TESTCMD_WALK_ENTRIES  20000	   /* directory entries read in that search */

/* Detect the test command of the checkout at repo_dir. On success *cmd is the shell command
 * (run from the repository root) and *why names what decided it, short enough to show after
 * the command: "Makefile target test", "pytest.ini", "AGENTS.md section \"Testing\"",
 * ".github/workflows/ci.yml job test, steps \"Build\", \"Test\"", "tox.ini [testenv]
 * commands". Both are malloc'd and owned by the caller; both are NULL on failure. Returns 0;
 * AP_ENOTFOUND when nothing matched, with a message that starts "no test command detected;
 * looked at: " and lists every source looked at (callers add how to set one); AP_EIO when
 * repo_dir cannot be opened; AP_ENOMEM. */
int testcmd_detect(char **cmd, char **why, const char *repo_dir);

/* Whether line is a documented command rule 1 above accepts (exposed for unit tests). */
bool testcmd_is_runner(const char *line);

/* Rule 3's reading of a tox.ini text[0..len): the `commands` of [testenv] (else [testenv:test]
 * or [testenv:tests]) joined with " && ", in *cmd (malloc'd). {posargs} becomes nothing and
 * {posargs:DEFAULT} its default, {envpython} python3, {toxinidir} and {tox_root} "."; a line
 * starting with "-" (its failure ignored) becomes "(CMD || true)"; factor-conditional lines
 * ("py38: ...") are left out. 0; AP_ENOTFOUND when there is no such section or it has no
 * commands; AP_EINVAL when a command has another substitution or a shell character (tox runs
 * no shell, so it would mean something else) or the result is longer than
 * TESTCMD_MAX_TOX_CMD; messages say which. Exposed for unit tests and the fuzzer. */
#define TESTCMD_MAX_TOX_CMD 1000
int testcmd_tox_commands(char **cmd, const char *text, size_t len);

#endif
