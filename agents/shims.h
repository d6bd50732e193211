/* SPDX-License-Identifier: MIT */
/* agents/shims.h - the host's runner shims: per-test results whatever wraps the test runner.
 *
 * A test command is often not the runner itself: `make test`, `npm test`, a shell script or
 * `cmake ... && ctest` start it somewhere inside. So for every test run the Tester writes a
 * directory of shims (SHIMS_DIR, outside every tree) into the run's fresh box and puts it
 * first on PATH, with AP_REPORT_DIR naming the run's fresh report directory. Each shim is one
 * POSIX shell script under the names of the runners' programs; it finds the real program of
 * its name further down PATH and runs it with the options that make it
 *
 *   - write its per-test results into AP_REPORT_DIR, one file per invocation (name.PID.NS.ext):
 *     `go test -json` (.gojson), cargo's libtest lines with its "Running" lines (.cargo),
 *     `ctest --output-junit` (.xml), the unittest runner below (.xml), jest `--json
 *     --outputFile` (.jestjson), vitest's json reporter (.vitestjson), mocha's xunit
 *     reporter (.xml), pytest inside tox (.xml); Maven Surefire and Gradle (`gradle`, and
 *     `./gradlew` through the `java` shim, which knows Gradle's wrapper) write their JUnit
 *     XML in the tree, and the files this run wrote are copied into AP_REPORT_DIR;
 *   - run the whole suite: `go test` without -failfast, `cargo test --no-fail-fast`, ctest
 *     without --stop-on-failure, `mvn -fae`, `gradle --continue`, unittest without
 *     failfast, jest, vitest and mocha without --bail.
 *
 * `python -m unittest ARGS` runs the host's ap_unittest.py: unittest's own main and text
 * output, with every result also written as JUnit XML. `tox ARGS` (and `python -m tox`) runs
 * tox through the host's ap_tox.py, which keeps the shims first on PATH inside each tox
 * environment (tox puts the environment's bin/ first) with AP_REPORT_DIR, and gives pytest
 * there PYTEST_ADDOPTS with a JUnit report per environment (tox passes neither variable).
 *
 * The shims are the host's text, never the tree's: written afresh for each run, read-only
 * (mode 0555) outside the trees; what they write is parsed as untrusted bytes like any other
 * report (agents/report.h). A command that calls a runner by its absolute path, or a tool
 * that resets PATH (nox), bypasses them: that run has no per-test results, and says so.
 */
#ifndef AP_SHIMS_H
#define AP_SHIMS_H

#define SHIMS_DIR "/tmp/trees/.ap-bin" /* exec-able tmpfs, outside every tree */

/* The names the shim is linked under in SHIMS_DIR, space-separated. */
#define SHIMS_NAMES                                                                                \
	"go cargo ctest mvn gradle java tox python python3 python3.9 python3.10 python3.11 "       \
	"python3.12 python3.13 node nodejs"

/* The shim script (POSIX sh), the unittest runner and the tox starter (Python 3):
 * agents/shims/ap_shim.sh, ap_unittest.py and ap_tox.py, compiled in at build time
 * (scripts/embed.py). */
extern const char shim_ap_shim[];
extern const char shim_ap_unittest[];
extern const char shim_ap_tox[];

#endif
