"""Every runner gives the Tester per-test results, whatever wraps it; reproductions are named by
test and checked by those results; every suite runs whole (issue 27). `autopatch fix` through
the real binary, the real Docker sandbox (one flavour image per language) and the real Tester,
with the scripted model stand-in. The fixtures are tests/fixtures/runners/<language>: the same
small "units" library in each language (parse "4K", print 4096 as "4K"), whose parser refuses
lowercase units (the real bug), with a real fix and a planted regression in the last test
target / package / module. Each fixture's test command wraps its runner (`make test`, a shell
script around cmake and ctest), so the per-test results come from the host's runner shims."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from agents_util import call, tool_results
from proof_util import fix, make_repo, replace, script, write

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "runners"
ISSUE = """
    Lowercase units are refused

    Parsing "4k" fails; it should give 4096, like "4K".
    """


def fixture_repo(tmp_path, name, extra=None):
    """tests/fixtures/runners/NAME (autopatch.yml as .github/autopatch.yml) in a fresh git
    repository, plus extra {path: text}."""
    root = FIXTURES / name
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            rel = p.relative_to(root).as_posix()
            files[".github/autopatch.yml" if rel == "autopatch.yml" else rel] = p.read_text()
    files.update(extra or {})
    return make_repo(tmp_path, files)


def finish(test_path, test_command, test_id):
    return call("finish", test_path=test_path, test_command=test_command, test_id=test_id,
                summary="accept lowercase units")


def events(r):
    return [json.loads(x) for x in r.traj_path.read_text().splitlines()]


def runs(r, kind):
    return [e for e in events(r) if e["type"] == "tester_run" and e["kind"] == kind]


def feedback(r, n):
    """The Tester's answer to the Builder's n-th finish (1-based)."""
    answers = [t for t in tool_results(r.by_role("builder")[-1]) if t.startswith("Tester: ")]
    return answers[n - 1]


def need_image(flavour):
    if subprocess.run(["docker", "image", "inspect", "autopatch-sandbox:" + flavour],
                      capture_output=True).returncode != 0:
        pytest.fail("the %s sandbox image is missing: deploy/sandbox-image/build.sh --flavor %s"
                    % (flavour, flavour))


# ---- Go: two packages behind `make test` --------------------------------------------------

GO_REPRO = "size/size_lower_test.go"
GO_TEST = """
    package size

    import "testing"

    func TestParseLowercase(t *testing.T) {
    \tif n, err := Parse("4k"); err != nil || n != 4096 {
    \t\tt.Fatalf("Parse(\\"4k\\") = %d, %v; want 4096", n, err)
    \t}
    }
    """
GO_FIX = replace("size/size.go",
                 "\t\tif strings.HasSuffix(s, Units[i]) {\n\t\t\ts = strings.TrimSuffix(s, Units[i])\n",
                 "\t\tif strings.HasSuffix(strings.ToUpper(s), Units[i]) {\n"
                 "\t\t\ts = s[:len(s)-len(Units[i])]\n")
GO_BREAK = replace("format/format.go", "n%1024 == 0", "n%1000 == 0")
GO_UNBREAK = replace("format/format.go", "n%1000 == 0", "n%1024 == 0")
GO_CMD = "go test -run '^TestParseLowercase$' ./size"


def test_go_regression_in_the_last_package_is_named_and_real_fix_proven(autopatch_bin,
                                                                       tmp_path):
    """`make test` runs `go test ./...`: the shim makes it `go test -json` into the run's
    report directory. A repro named by package and test (`go test -run '^TestX$' ./size`
    names no file) is checked by results: a name the run did not report is refused with the
    names it did; the planted regression in the second package is refused by name; the real
    fix is proven. (One job for the three rounds; the go image's compiled standard library
    spares each run's fresh box from compiling it.)"""
    need_image("go")
    repo = fixture_repo(tmp_path, "go")
    s = script(write(GO_REPRO, GO_TEST), GO_FIX, GO_BREAK,
               finish(GO_REPRO, GO_CMD, "size::TestParseLowercaseUnits"),
               finish(GO_REPRO, GO_CMD, "size::TestParseLowercase"),
               GO_UNBREAK, finish(GO_REPRO, GO_CMD, "size::TestParseLowercase"))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "3"])
    assert r.code == 0, r
    assert "(from `go test -json`)" in r.out, r.out  # the baseline, behind make
    one = feedback(r, 1)
    assert ("the reproduction test `size::TestParseLowercaseUnits` is not among the 1 tests "
            "the run on the pristine code reported (`example.com/units/size::"
            "TestParseLowercase`)") in one, one
    two = feedback(r, 2)
    assert "the patch breaks 1 test that passed before" in two, two
    assert "`example.com/units/format::TestHuman`: failed:" in two, two
    assert "round 3: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`example.com/units/size::TestParseLowercase` failed" in ev, ev
    assert "per-test results from `go test -json`" in ev
    assert ("test `size::TestParseLowercase` (found in the per-test results of both runs), "
            "run with `%s`" % GO_CMD) in ev, ev
    base = runs(r, "suite")[0]
    assert base["passed"] == 3 and base["command"] == "make test", base


# ---- Rust: a crate with test targets, one of them already failing ------------------------

RUST_REPRO = "tests/lower.rs"
RUST_TEST = """
    #[test]
    fn lowercase_units() {
        assert_eq!(units::parse("4k"), Some(4096));
    }
    """
RUST_FIX = replace("src/lib.rs", "        if let Some(num) = s.strip_suffix(u) {\n",
                   "        if s.to_ascii_uppercase().ends_with(u) {\n"
                   "            let num = &s[..s.len() - u.len()];\n")
RUST_BREAK = replace("src/lib.rs", "n % 1024 == 0", "n % 1000 == 0")
RUST_UNBREAK = replace("src/lib.rs", "n % 1000 == 0", "n % 1024 == 0")
# An earlier target with a test that already fails: `cargo test` alone stops there and never
# runs tests/render.rs, where the regression shows.
KNOWN = {"tests/known.rs": """
    #[test]
    fn fractions_known_bug() {
        assert_eq!(units::parse("1.5K"), Some(1536));
    }
    """}


def test_rust_regression_in_the_last_target_is_found_past_a_failing_target(autopatch_bin,
                                                                          tmp_path):
    """`make test` runs `cargo test`; the shim adds --no-fail-fast, so the target after the
    already-failing one runs on both sides and the planted regression there is refused by
    name (target and test); the real fix is proven with the repro named by target + test."""
    need_image("rust")
    repo = fixture_repo(tmp_path, "rust", KNOWN)
    s = script(write(RUST_REPRO, RUST_TEST), RUST_FIX, RUST_BREAK,
               finish(RUST_REPRO, "cargo test --test lower", "lower::lowercase_units"),
               RUST_UNBREAK,
               finish(RUST_REPRO, "cargo test --test lower", "lower::lowercase_units"))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    base = runs(r, "suite")[0]
    # src/lib.rs 1, tests/known.rs 1 (failing), tests/parse.rs 2, tests/render.rs 1
    assert base["passed"] == 4 and base["failed"] == 1, base
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`tests/render.rs::human_sizes`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`tests/lower.rs::lowercase_units` failed" in ev, ev
    assert "already failing before the patch (1): `tests/known.rs::fractions_known_bug`" in ev


def test_cargo_stopping_at_the_first_failing_target_is_never_trusted(autopatch_bin, tmp_path):
    """cargo run past the shims (by its path) stops at the first failing target: the suite's
    evidence is incomplete, and the job says so before any model call."""
    need_image("rust")
    repo = fixture_repo(tmp_path, "rust", dict(KNOWN, **{
        ".github/autopatch.yml": "image: rust\ntest: /usr/bin/cargo test\n"}))
    s = script(write(RUST_REPRO, RUST_TEST), RUST_FIX,
               finish(RUST_REPRO, "cargo test --test lower", "lower::lowercase_units"))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s)
    assert r.code == 3, r
    assert len(r.requests) == 0
    assert ("cargo stopped at the first failing test target (it ran without "
            "`--no-fail-fast`), so the tests after that point never ran") in r.out, r.out
    assert "cargo test --no-fail-fast" in r.out


# ---- C: CMake + ctest behind a shell script ------------------------------------------------

C_REPRO = "tests/test_lower.c"
C_TEST = """
    #include "check.h"
    #include "units.h"

    int main(void)
    {
    \tlong long n = 0;

    \tCHECK(units_parse("4k", &n) == 0 && n == 4096);
    \treturn failures != 0;
    }
    """
C_FIX = [replace("src/units.c", "#include <stdio.h>\n", "#include <ctype.h>\n#include <stdio.h>\n"),
         replace("src/units.c", "\tu = strchr(UNITS, *end);\n",
                 "\tu = strchr(UNITS, toupper((unsigned char)*end));\n")]
C_BREAK = replace("src/units.c", "n % 1024 == 0", "n % 1000 == 0")
C_UNBREAK = replace("src/units.c", "n % 1000 == 0", "n % 1024 == 0")
C_CMD = "sh ci/test.sh -R '^test_lower$'"


def test_ctest_inside_a_script_gives_per_test_results(autopatch_bin, tmp_path):
    """`sh ci/test.sh` configures, builds and runs ctest: the shim adds --output-junit, so
    the planted regression is refused naming the ctest test, and the fix is proven with the
    repro named by its ctest name."""
    need_image("c")
    repo = fixture_repo(tmp_path, "cmake")
    s = script(write(C_REPRO, C_TEST), *C_FIX, C_BREAK,
               finish(C_REPRO, C_CMD, "test_lower"),
               C_UNBREAK, finish(C_REPRO, C_CMD, "test_lower"))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert "2 passed, 0 failed, 0 skipped, 0 errors (from JUnit XML)" in r.out, r.out
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`test_render::test_render`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`test_lower::test_lower` failed" in ev, ev


# ---- Python: unittest, tests inside the package, behind `make test` ----------------------

PY_REPRO = "units/tests/test_lower.py"
PY_TEST = """
    import unittest

    import units


    class TestLower(unittest.TestCase):
        def test_lowercase_units(self):
            self.assertEqual(units.parse("4k"), 4096)
    """
PY_FIX = replace("units/__init__.py", "        if s.endswith(UNITS[i]):\n",
                 "        if s.upper().endswith(UNITS[i]):\n")
PY_BREAK = replace("units/__init__.py", "n % 1024 == 0", "n % 1000 == 0")
PY_UNBREAK = replace("units/__init__.py", "n % 1000 == 0", "n % 1024 == 0")
PY_CMD = "python3 -m unittest units.tests.test_lower"
PY_ID = "units.tests.test_lower.TestLower.test_lowercase_units"


def test_unittest_behind_make_is_read_per_test(autopatch_bin, tmp_path):
    """`make test` runs `python3 -m unittest` (tests inside the package): the shim runs it
    through the host's JUnit-writing runner, so the planted regression is named and the fix
    proven with the repro named by its unittest id."""
    repo = fixture_repo(tmp_path, "unittest")
    s = script(write(PY_REPRO, PY_TEST), PY_FIX, PY_BREAK, finish(PY_REPRO, PY_CMD, PY_ID),
               PY_UNBREAK, finish(PY_REPRO, PY_CMD, PY_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from JUnit XML)" in r.out, r.out
    one = feedback(r, 1)
    assert "`units.tests.test_render.TestRender::test_human`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`units.tests.test_lower.TestLower::test_lowercase_units` failed" in ev, ev


def test_pytest_stopping_at_the_first_failure_is_never_trusted(autopatch_bin, tmp_path):
    """`pytest -x` on a suite with a failing test stops there: never evidence."""
    repo = fixture_repo(tmp_path, "unittest", {
        ".github/autopatch.yml": "image: python\ntest: python3 -m pytest -x -q units\n",
        "units/tests/test_known.py": """
            import units


            def test_fraction_known_bug():
                assert units.parse("1.5K") == 1536
            """})
    s = script(write(PY_REPRO, PY_TEST), PY_FIX, finish(PY_REPRO, PY_CMD, PY_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s)
    assert r.code == 3, r
    assert len(r.requests) == 0
    assert "pytest stopped after the first failures (`-x`, `--exitfirst` or `--maxfail`)" in r.out


# ---- Python: tox around unittest and pytest, tests inside the package ---------------------

TOX_CMD = "tox -e py3 -- units.tests.test_lower"


def test_tox_ini_commands_are_found_and_the_fix_proven_by_test(autopatch_bin, tmp_path):
    """No autopatch.yml: tox.ini's [testenv] commands are the test command, and the answer
    says so; the repro named by its unittest id is proven, the planted regression in the last
    module (units/tests/test_render.py) is refused naming that test."""
    repo = fixture_repo(tmp_path, "tox")
    s = script(write(PY_REPRO, PY_TEST), PY_FIX, PY_BREAK, finish(PY_REPRO, PY_CMD, PY_ID),
               PY_UNBREAK, finish(PY_REPRO, PY_CMD, PY_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert ("test command: python -m unittest (detected: tox.ini [testenv] commands)"
            in r.out), r.out
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from JUnit XML)" in r.out, r.out
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`units.tests.test_render.TestRender::test_human`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`units.tests.test_lower.TestLower::test_lowercase_units` failed" in ev, ev


def test_tox_around_unittest_and_pytest_gives_per_test_results(autopatch_bin, tmp_path):
    """`tox` runs two environments offline (tox.ini: skip_install; the pytest one with the
    image's pytest through sitepackages). tox puts each environment's bin/ first on PATH and
    passes neither AP_REPORT_DIR nor PYTEST_ADDOPTS: through the tox shim, unittest in one
    environment and pytest in the other both report per test (so the baseline's results come
    from two runners), the regression in the last module is refused by name in both, and the
    repro run through `tox -e py3 -- MODULE` is proven by its unittest id."""
    repo = fixture_repo(tmp_path, "tox", {".github/autopatch.yml": "image: python\ntest: tox\n"})
    s = script(write(PY_REPRO, PY_TEST), PY_FIX, PY_BREAK, finish(PY_REPRO, TOX_CMD, PY_ID),
               PY_UNBREAK, finish(PY_REPRO, TOX_CMD, PY_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert ("3 passed, 0 failed, 0 skipped, 0 errors (from the reports of several runners)"
            in r.out), r.out
    base = runs(r, "suite")[0]
    assert base["passed"] == 3 and base["command"] == "tox", base
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`units.tests.test_render.TestRender::test_human`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`units.tests.test_lower.TestLower::test_lowercase_units` failed" in ev, ev
    assert ("test `%s` (found in the per-test results of both runs), run with `%s`"
            % (PY_ID, TOX_CMD)) in ev, ev


def test_tox_that_cannot_install_offline_is_told_which_shapes_work(autopatch_bin, tmp_path):
    """A tox environment with `deps = pytest` and no sitepackages makes pip reach for the
    index, which the box does not have: the baseline is an environment failure before any
    model call, and the advice names the tox.ini shapes that work offline."""
    repo = fixture_repo(tmp_path, "tox", {
        ".github/autopatch.yml": "image: python\ntest: tox\n",
        "tox.ini": "[tox]\nenvlist = py3\n\n[testenv]\nskip_install = true\n"
                   "deps = pytest\ncommands = python -m pytest -q\n"})
    s = script(write(PY_REPRO, PY_TEST), PY_FIX, finish(PY_REPRO, TOX_CMD, PY_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s)
    assert r.code == 3, r
    assert len(r.requests) == 0
    assert "tox could not install what its environment needs" in r.out, r.out
    assert "`sitepackages = true`" in r.out and "`skip_install = true`" in r.out, r.out


def test_a_chain_of_test_runs_that_stops_at_the_first_failure_is_never_trusted(autopatch_bin,
                                                                              tmp_path):
    """`A && B` with A failing never runs B (like `go test ./a && go test ./b`): the baseline
    has per-test results for A only, so a regression in B could never be seen. Such a failed
    chain is not evidence: the job says so before any model call, with what to change."""
    repo = fixture_repo(tmp_path, "unittest", {
        ".github/autopatch.yml": "image: python\ntest: python3 -m unittest units.tests.test_known"
                                 " && python3 -m unittest units.tests.test_render\n",
        "units/tests/test_known.py": """
            import unittest

            import units


            class TestKnown(unittest.TestCase):
                def test_fraction_known_bug(self):
                    self.assertEqual(units.parse("1.5K"), 1536)
            """})
    s = script(write(PY_REPRO, PY_TEST), PY_FIX, finish(PY_REPRO, PY_CMD, PY_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s)
    assert r.code == 3, r
    assert len(r.requests) == 0
    assert ("the test command runs several test commands joined by `&&`, which stops at the "
            "first one that fails, so the tests after that point never ran") in r.out, r.out
    assert "no `&&` chain that stops at the first failing runner" in r.out, r.out


# ---- JavaScript: mocha behind `npm test` ----------------------------------------------------

NODE_MODULES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "node_modules"
JS_REPRO = "test/lower.test.js"
JS_TEST = """
    "use strict";
    const assert = require("node:assert");
    const { parse } = require("..");

    describe("parse lowercase", () => {
      it("reads lowercase units", () => {
        assert.strictEqual(parse("4k"), 4096);
      });
    });
    """
JS_FIX = replace("index.js", "    if (s.endsWith(UNITS[i])) {\n",
                 "    if (s.toUpperCase().endsWith(UNITS[i])) {\n")
JS_BREAK = replace("index.js", "n % 1024 === 0", "n % 1000 === 0")
JS_UNBREAK = replace("index.js", "n % 1000 === 0", "n % 1024 === 0")
JS_CMD = "npx mocha test/lower.test.js"
JS_ID = "parse lowercase::reads lowercase units"


def node_packages(runner):
    """The top-level folders of tests/fixtures/node_modules that runner needs: its own and,
    transitively, every package a package.json in them names (dependencies, optional and peer
    ones that are installed), nested node_modules included."""
    seen, todo = set(), [runner]
    while todo:
        name = todo.pop()
        if name in seen or not (NODE_MODULES / name / "package.json").is_file():
            continue
        seen.add(name)
        for meta in [NODE_MODULES / name / "package.json"] + sorted(
                (NODE_MODULES / name).glob("**/node_modules/**/package.json")):
            try:
                deps = json.loads(meta.read_text())
            except (OSError, ValueError):
                continue
            for key in ("dependencies", "optionalDependencies", "peerDependencies"):
                todo.extend(deps.get(key) or {})
    return seen


def node_repo(tmp_path, runner):
    """The mocha, jest or vitest fixture with the runner's node_modules (tests/fixtures,
    installed by scripts/bootstrap.sh from the npm registry) committed in, as a vendored
    project has it. Only the runner's own packages are copied (vitest: 51 packages, 26 MiB of
    the 61: copy and commit take 2.0 s instead of 8.6 s)."""
    if not (NODE_MODULES / runner).is_dir():
        pytest.fail("tests/fixtures/node_modules/%s is missing: run scripts/bootstrap.sh"
                    % runner)
    repo = fixture_repo(tmp_path, runner)
    names = node_packages(runner)
    for name in sorted(names):
        shutil.copytree(NODE_MODULES / name, repo / "node_modules" / name, symlinks=True)
    bins = repo / "node_modules" / ".bin"
    bins.mkdir()
    for link in sorted((NODE_MODULES / ".bin").iterdir()):
        target = os.readlink(link)
        parts = pathlib.PurePosixPath(target).parts[1:]
        owner = "/".join(parts[:2]) if parts and parts[0].startswith("@") else parts[0]
        if owner in names:
            os.symlink(target, bins / link.name)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["add", "-A"], ["commit", "-qm", "vendor the runner"]):
        subprocess.run(["git", "-C", str(repo)] + args, check=True, env=env)
    return repo


def test_mocha_behind_npm_test_is_read_per_test(autopatch_bin, tmp_path):
    """`npm test` runs mocha from node_modules/.bin, which starts node through PATH: the node
    shim adds mocha's xunit reporter, so the planted regression is named (suite :: title) and
    the fix proven with the repro named by test."""
    need_image("node")
    repo = node_repo(tmp_path, "mocha")
    s = script(write(JS_REPRO, JS_TEST), JS_FIX, JS_BREAK, finish(JS_REPRO, JS_CMD, JS_ID),
               JS_UNBREAK, finish(JS_REPRO, JS_CMD, JS_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from JUnit XML)" in r.out, r.out
    one = feedback(r, 1)
    assert "`human::writes the largest exact unit`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`parse lowercase::reads lowercase units` failed" in ev, ev


JEST_REPRO = "test/lower.test.js"
JEST_TEST = """
    "use strict";
    const { parse } = require("..");

    describe("parse lowercase", () => {
      test("reads lowercase units", () => {
        expect(parse("4k")).toBe(4096);
      });
    });
    """
JEST_CMD = "npx jest test/lower.test.js"
JEST_ID = "test/lower.test.js::parse lowercase reads lowercase units"


def test_jest_behind_npm_test_is_read_per_test(autopatch_bin, tmp_path):
    """`npm test` runs jest from node_modules/.bin: the node shim adds `--json --outputFile`
    into the run's report directory, so the planted regression is named (file :: full name)
    and the fix proven with the repro named by test."""
    need_image("node")
    repo = node_repo(tmp_path, "jest")
    s = script(write(JEST_REPRO, JEST_TEST), JS_FIX, JS_BREAK,
               finish(JEST_REPRO, JEST_CMD, JEST_ID), JS_UNBREAK,
               finish(JEST_REPRO, JEST_CMD, JEST_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from jest's JSON report)" in r.out, r.out
    one = feedback(r, 1)
    assert "`test/render.test.js::human writes the largest exact unit`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`test/lower.test.js::parse lowercase reads lowercase units` failed" in ev, ev


VITEST_REPRO = "test/lower.test.js"
VITEST_TEST = """
    import { describe, expect, test } from "vitest";
    import { parse } from "../index.js";

    describe("parse lowercase", () => {
      test("reads lowercase units", () => {
        expect(parse("4k")).toBe(4096);
      });
    });
    """
VITEST_CMD = "npx vitest run test/lower.test.js"
VITEST_ID = "test/lower.test.js::parse lowercase reads lowercase units"


def test_vitest_behind_npm_test_is_read_per_test(autopatch_bin, tmp_path):
    """`npm test` runs `vitest run` (ES modules; vite, esbuild and rollup with their linux-x64
    native binaries, vendored) from node_modules/.bin: the node shim adds vitest's JSON
    reporter writing into the run's report directory, so the planted regression in the later
    test file is named (file :: full name) and the fix proven with the repro named by test."""
    need_image("node")
    repo = node_repo(tmp_path, "vitest")
    s = script(write(VITEST_REPRO, VITEST_TEST), JS_FIX, JS_BREAK,
               finish(VITEST_REPRO, VITEST_CMD, VITEST_ID), JS_UNBREAK,
               finish(VITEST_REPRO, VITEST_CMD, VITEST_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 0, r
    assert "test command: npm test (from .github/autopatch.yml)\n" in r.out, r.out
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from vitest's JSON report)" in r.out, r.out
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`test/render.test.js::human writes the largest exact unit`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`%s` failed" % VITEST_ID in ev, ev
    assert ("test `%s` (found in the per-test results of both runs), run with `%s`"
            % (VITEST_ID, VITEST_CMD)) in ev, ev


# ---- Java: Maven Surefire behind a shell script --------------------------------------------

MVN_REPRO = "src/test/java/units/parse/LowerTest.java"
MVN_TEST = """
    package units.parse;

    import static org.junit.Assert.assertEquals;

    import org.junit.Test;
    import units.Units;

    public class LowerTest {
        @Test
        public void lowercaseUnits() {
            assertEquals(4096, Units.parse("4k"));
        }
    }
    """
MVN_SRC = "src/main/java/units/Units.java"
MVN_FIX = replace(MVN_SRC, "            if (s.endsWith(UNITS[i])) {\n",
                  "            if (s.toUpperCase().endsWith(UNITS[i])) {\n")
MVN_BREAK = replace(MVN_SRC, "n % 1024 == 0", "n % 1000 == 0")
MVN_UNBREAK = replace(MVN_SRC, "n % 1000 == 0", "n % 1024 == 0")
MVN_CMD = "mvn -B -q test -Dtest=LowerTest"
MVN_ID = "units.parse.LowerTest#lowercaseUnits"


def test_maven_surefire_behind_a_script_is_read_per_test(autopatch_bin, tmp_path):
    """`sh ci/test.sh` runs `mvn -B -q test`: the shim adds `-fae` and runs every test class,
    and Surefire's JUnit XML gives per-test results, so the planted regression in the last
    test class (another package) is refused naming that test, and the real fix is proven with
    the repro named as Maven names it (`Class#method`). The same job is the proof that a Maven
    project runs offline from Debian's packaged repository (issue 28; it was its own job in
    test_toolchains.py): no `image:` and no `network:`, the java flavour chosen from pom.xml,
    plugins unpinned, proven, and the patch free of `.m2/` and `target/`. (One job for all of
    it: every Maven run is a JVM start, a compile and a forked test JVM.)"""
    need_image("java")
    repo = fixture_repo(tmp_path, "maven")
    s = script(write(MVN_REPRO, MVN_TEST), MVN_FIX, MVN_BREAK,
               finish(MVN_REPRO, MVN_CMD, MVN_ID),
               MVN_UNBREAK, finish(MVN_REPRO, MVN_CMD, MVN_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"],
            timeout=1200)
    assert r.code == 0, r
    assert "flavour java: pom.xml in the checkout" in r.out, r.out
    assert re.search(r"toolchain: java \d+.*maven 3\.", r.out), r.out
    assert "PROVEN" in r.out, r.out
    diff = r.out_path.read_text()
    assert "Units.java" in diff and ".m2" not in diff and "target/" not in diff, diff
    # the baseline, from the reports the shim copied into the run's report directory (not
    # "the JUnit XML files the run wrote in the tree")
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from JUnit XML)" in r.out, r.out
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`units.render.RenderTest::largestExactUnit`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`units.parse.LowerTest::lowercaseUnits` failed" in ev, ev
    assert ("test `%s` (found in the per-test results of both runs), run with `%s`"
            % (MVN_ID, MVN_CMD)) in ev, ev
    base = runs(r, "suite")[0]
    assert base["passed"] == 3 and base["command"] == "sh ci/test.sh", base


# ---- Java: Gradle (Debian's, offline) behind a shell script ----------------------------------

GRADLE_CMD = "gradle --offline -q test --tests units.parse.LowerTest"


def test_gradle_behind_a_script_is_read_per_test(autopatch_bin, tmp_path):
    """`sh ci/test.sh` runs Debian's Gradle offline: the gradle shim adds `--continue` and
    copies the JUnit XML this run wrote under build/test-results into the run's report
    directory, so the planted regression in the last test class is refused naming that test
    and the real fix is proven with the repro named as `Class#method`. (One job for both
    rounds: a Gradle run in a fresh box takes ~6 s, see the java image's gradle wrapper.)"""
    need_image("java")
    repo = fixture_repo(tmp_path, "gradle")
    s = script(write(MVN_REPRO, MVN_TEST), MVN_FIX, MVN_BREAK,
               finish(MVN_REPRO, GRADLE_CMD, MVN_ID),
               MVN_UNBREAK, finish(MVN_REPRO, GRADLE_CMD, MVN_ID))
    r = fix(autopatch_bin, tmp_path, repo, ISSUE, s, args=["--max-iterations", "2"],
            timeout=1800)
    assert r.code == 0, r
    # from the reports the shim copied (not "the JUnit XML files the run wrote in the tree")
    assert "3 passed, 0 failed, 0 skipped, 0 errors (from JUnit XML)" in r.out, r.out
    one = feedback(r, 1)
    assert "the patch breaks 1 test that passed before" in one, one
    assert "`units.render.RenderTest::largestExactUnit`" in one, one
    assert "round 2: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "`units.parse.LowerTest::lowercaseUnits` failed" in ev, ev
    assert ("test `%s` (found in the per-test results of both runs), run with `%s`"
            % (MVN_ID, GRADLE_CMD)) in ev, ev
    base = runs(r, "suite")[0]
    assert base["passed"] == 3 and base["command"] == "sh ci/test.sh", base


SHIM = pathlib.Path(__file__).resolve().parents[2] / "agents" / "shims" / "ap_shim.sh"
FAKE_MVN = """#!/bin/sh
# stands in for Maven: says its arguments, writes one Surefire report, fails like a failing test
echo "args: $*"
# Maven starts a JVM first: its reports are written well after the shim's start marker (a
# file written within the same tick of the file system's clock is not -newer)
sleep 0.1
mkdir -p target/surefire-reports
cd target/surefire-reports
echo '<testsuite name="units.render.RenderTest"/>' > TEST-units.render.RenderTest.xml
exit 1
"""


def test_mvn_shim_copies_only_this_runs_surefire_reports_into_the_report_dir(tmp_path):
    """The `mvn` shim (no Docker: Maven stood in by a script) adds -fae, keeps Maven's exit
    status, and copies the Surefire reports this run wrote into AP_REPORT_DIR; a report older
    than the run (committed, or left by an earlier run) and a symbolic link are not copied."""
    shims, real, tree, rdir = (tmp_path / d for d in ("shims", "bin", "tree", "reports"))
    for d in (shims, real, rdir):
        d.mkdir()
    (shims / "ap-shim").write_text(SHIM.read_text())  # as the Tester writes it
    (shims / "ap-shim").chmod(0o555)
    (shims / "mvn").symlink_to("ap-shim")
    (real / "mvn").write_text(FAKE_MVN)
    (real / "mvn").chmod(0o755)
    old = tree / "sub" / "target" / "surefire-reports"
    old.mkdir(parents=True)
    (old / "TEST-stale.OldTest.xml").write_text("<testsuite/>")
    os.utime(old / "TEST-stale.OldTest.xml", (1, 1))
    (old / "TEST-link.xml").symlink_to(tmp_path / "elsewhere.xml")
    (tmp_path / "elsewhere.xml").write_text("<testsuite/>")
    p = subprocess.run(["sh", "-c", "mvn -B -ff test"], cwd=tree, capture_output=True,
                       text=True, env=dict(os.environ, AP_REPORT_DIR=str(rdir),
                                           PATH="%s:%s:/usr/bin:/bin" % (shims, real)))
    assert p.returncode == 1, p
    assert p.stdout == "args: -fae -Dsurefire.skipAfterFailureCount=0 -B test\n", p
    copied = sorted(rdir.iterdir())
    assert [c.suffix for c in copied] == [".xml"], copied
    assert copied[0].name.startswith("mvn."), copied
    assert "units.render.RenderTest" in copied[0].read_text()
    assert not copied[0].is_symlink()


FAKE_NODE = """#!/bin/sh
# stands in for node: says its arguments
echo "args: $*"
"""


def shim_env(tmp_path, name, real_text):
    """A shims directory as the Tester writes it (ap-shim linked as name), a directory with
    the real program stood in by real_text, and a fresh report directory."""
    shims, real, rdir = (tmp_path / d for d in ("shims", "bin", "reports"))
    for d in (shims, real, rdir):
        d.mkdir()
    (shims / "ap-shim").write_text(SHIM.read_text())
    (shims / "ap-shim").chmod(0o555)
    (shims / name).symlink_to("ap-shim")
    (real / name).write_text(real_text)
    (real / name).chmod(0o755)
    return rdir, dict(os.environ, AP_REPORT_DIR=str(rdir),
                      PATH="%s:%s:/usr/bin:/bin" % (shims, real))


def test_node_shim_gives_vitest_its_json_reporter_and_runs_the_whole_suite(tmp_path):
    """vitest (node_modules/.bin/vitest starts node through PATH): the node shim keeps the
    command's own arguments, drops `--bail N` and a user's `--outputFile`, adds the default
    console reporter only when the command names none, and the json reporter into the report
    directory (node.*.vitestjson, parsed as jest's format); `vitest bench` is left alone."""
    rdir, env = shim_env(tmp_path, "node", FAKE_NODE)
    cases = [
        ("node node_modules/.bin/vitest run --bail 1 --outputFile junit.xml test/a.test.js",
         "args: node_modules/.bin/vitest run test/a.test.js --reporter=default "
         "--reporter=json --outputFile.json=%s/node."),
        ("node /r/node_modules/vitest/vitest.mjs --bail=2 --reporter=verbose "
         "--outputFile.junit=j.xml -t 'parse lowercase'",
         "args: /r/node_modules/vitest/vitest.mjs --reporter=verbose -t parse lowercase "
         "--reporter=json --outputFile.json=%s/node."),
        ("node node_modules/.bin/vitest --bail run", "args: node_modules/.bin/vitest run "
         "--reporter=default --reporter=json --outputFile.json=%s/node."),
        ("node node_modules/.bin/vitest bench --bail 1", "args: node_modules/.bin/vitest "
         "bench --bail 1\n"),
    ]
    for cmd, want in cases:
        p = subprocess.run(["sh", "-c", cmd], cwd=tmp_path, capture_output=True, text=True,
                           env=env)
        assert p.returncode == 0, p
        want = want.replace("%s", str(rdir))
        assert p.stdout.startswith(want), (cmd, p.stdout)
        if "--outputFile.json" in want:
            assert p.stdout.rstrip().endswith(".vitestjson"), p.stdout


FAKE_JAVA = """#!/bin/sh
# stands in for java: says its arguments; as Gradle's wrapper, writes one test report
echo "args: $*"
case " $* " in *" org.gradle.wrapper.GradleWrapperMain "*|*"gradle-wrapper.jar "*) ;; *) exit 0;; esac
sleep 0.1
mkdir -p build/test-results/test
echo '<testsuite name="units.render.RenderTest"/>' > build/test-results/test/TEST-units.render.RenderTest.xml
exit 1
"""
GRADLEW = """#!/bin/sh
# the shape of Gradle's wrapper script: java from PATH when JAVA_HOME is unset
APP_HOME=${0%/*}
exec java -Xmx64m -classpath "$APP_HOME/gradle/wrapper/gradle-wrapper.jar" \\
    org.gradle.wrapper.GradleWrapperMain "$@"
"""


def test_gradlew_through_the_java_shim_runs_on_and_copies_this_runs_reports(tmp_path):
    """`./gradlew test` bypasses the gradle shim but starts java through PATH: the java shim
    sees Gradle's wrapper, adds `--continue` after its main class (or after `-jar
    gradle-wrapper.jar`), drops `--fail-fast`, keeps the exit status, and copies the JUnit
    files this run wrote under build/test-results into the report directory; a stale report
    and a symbolic link are not copied; any other java runs unchanged."""
    rdir, env = shim_env(tmp_path, "java", FAKE_JAVA)
    tree = tmp_path / "tree"
    old = tree / "sub" / "build" / "test-results" / "test"
    old.mkdir(parents=True)
    (old / "TEST-stale.OldTest.xml").write_text("<testsuite/>")
    os.utime(old / "TEST-stale.OldTest.xml", (1, 1))
    (old / "TEST-link.xml").symlink_to(tmp_path / "elsewhere.xml")
    (tmp_path / "elsewhere.xml").write_text("<testsuite/>")
    (tree / "gradlew").write_text(GRADLEW)
    (tree / "gradlew").chmod(0o755)

    def run(cmd):
        return subprocess.run(["sh", "-c", cmd], cwd=tree, capture_output=True, text=True,
                              env=env)

    p = run("./gradlew test --fail-fast -p .")
    assert p.returncode == 1, p
    assert p.stdout == ("args: -Xmx64m -classpath ./gradle/wrapper/gradle-wrapper.jar "
                        "org.gradle.wrapper.GradleWrapperMain --continue test -p .\n"), p
    copied = sorted(rdir.iterdir())
    assert [c.name.startswith("java.") and c.suffix == ".xml" for c in copied] == [True], copied
    assert "units.render.RenderTest" in copied[0].read_text()
    for c in copied:
        c.unlink()
    p = run("java -jar gradle/wrapper/gradle-wrapper.jar test")
    assert p.returncode == 1, p
    assert p.stdout == "args: -jar gradle/wrapper/gradle-wrapper.jar --continue test\n", p
    assert len(list(rdir.iterdir())) == 1
    p = run("java -cp x.jar Main --fail-fast")
    assert (p.returncode, p.stdout) == (0, "args: -cp x.jar Main --fail-fast\n"), p
