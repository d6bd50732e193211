"""The proof holds on the shapes real repositories have (issue 10): `autopatch fix` through the
real binary, the real Docker sandbox and the real Tester, with the scripted model stand-in.
Each fixture is written here (tests/e2e/proof_util.py). Each test fails if the behaviour it
names breaks: proven for real fixes, refused with the true reason otherwise, environment
failures before any model call."""
import json
import re

import pytest

from agents_util import tool_results
from proof_util import (BIG_ISSUE, BIG_N, BIG_SUITE, C_ISSUE, C_PROJECT, HANG, HANG_ISSUE,
                        JS_ISSUE, JS_PROJECT, NOT_HANG_ISSUE, OPTIONAL, OPTIONAL_ISSUE, PY_SHOP,
                        SHOP_ISSUE, SRC_LAYOUT, UNITS_ISSUE, finish, fix, make_repo, replace,
                        script, write)

C_REPRO = "tests/test_clamp_high.c"
C_REPRO_CMD = "make run T=tests/test_clamp_high.c"
C_FIX_OLD = "\tif (v > hi)\n\t\treturn lo;\n"
C_FIX_NEW = "\tif (v > hi)\n\t\treturn hi;\n"


def c_test(expr, want):
    return ('#include "check.h"\n#include "clamp.h"\n\nint main(void)\n{\n'
            '\tCHECK_EQ(%s, %s);\n\treturn failures != 0;\n}\n' % (expr, want))


def events(r):
    return [json.loads(x) for x in r.traj_path.read_text().splitlines()]


def test_c_make_test_comment_only_fix_is_refused_and_real_fix_proven(autopatch_bin, tmp_path):
    """`make test` builds and runs test binaries: they must run on the pristine tree too (no
    noexec), so a comment-only "fix" is refused for what is really wrong with it."""
    repo = make_repo(tmp_path, C_PROJECT)
    comment_only = replace("src/clamp.c", "int clamp(int v, int lo, int hi)\n",
                           "/* clamp: keep v inside [lo, hi] */\nint clamp(int v, int lo, int hi)\n")
    s = script(
        # round 1: a test that does not reproduce + a comment: passes on pristine
        write(C_REPRO, c_test("clamp(7, 0, 10)", "7")), comment_only, finish(C_REPRO, C_REPRO_CMD),
        # round 2: a reproducing test, still only the comment: fails on the patch too
        write(C_REPRO, c_test("clamp(15, 0, 10)", "10")), finish(C_REPRO, C_REPRO_CMD),
        # round 3: the real fix
        replace("src/clamp.c", C_FIX_OLD, C_FIX_NEW), finish(C_REPRO, C_REPRO_CMD))
    r = fix(autopatch_bin, tmp_path, repo, C_ISSUE, s, args=["--max-iterations", "3"])
    assert r.code == 0, r
    assert ("round 1: rejected - the reproduction test PASSED on the pristine code (exit 0)"
            in r.out), r
    assert "round 2: rejected - the reproduction test FAILS on the patched code (exit 2)" in r.out
    round2 = tool_results(r.by_role("builder")[5])[-1]
    assert "FAIL: clamp(15, 0, 10) = 0, want 10" in round2  # the binary ran on the patch
    assert "round 3: proven" in r.out
    # the evidence: the pristine failure with its real output (the binary ran there), never
    # an empty block; the suite compared by exit status because the pristine suite passed
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "**fails** with exit status 2" in ev
    assert "FAIL: clamp(15, 0, 10) = 0, want 10" in ev
    assert "```\n```" not in ev
    assert "(no per-test results: compared by exit status)\n- pristine: exit 0\n- patched: exit 0" in ev
    diff = r.out_path.read_text()
    assert "+\t\treturn hi;" in diff and "build/" not in diff


def test_colour_addopts_and_already_failing_test_do_not_hide_a_regression(autopatch_bin,
                                                                         tmp_path):
    """`addopts = --color=yes` and a test that already fails: the regression is still found
    per test and named; the already-failing test is not blamed."""
    repo = make_repo(tmp_path, PY_SHOP)
    s = script(
        write("tests/test_discount_fraction.py", """
            import shop


            def test_fraction_kept():
                assert abs(shop.discount(19.99, 10) - 17.991) < 1e-9
            """),
        replace("shop.py", "    return price - price * percent // 100\n",
                "    return price - price * percent / 100\n"),
        # the planted regression: total() loses its rounding
        replace("shop.py", "    return round(sum(prices), 2)\n", "    return sum(prices) + 0.001\n"),
        finish("tests/test_discount_fraction.py",
               "python3 -m pytest -q tests/test_discount_fraction.py"))
    r = fix(autopatch_bin, tmp_path, repo, SHOP_ISSUE, s, args=["--max-iterations", "1"])
    assert r.code == 1, r
    assert "the patch breaks 1 test that passed before" in r.out, r
    assert "`tests.test_shop::test_total`: failed" in r.out
    reason = r.out.split("NOT PROVEN:")[1]
    assert "test_tax_rounding" not in reason
    assert "baseline: the suite ran on the unchanged code" in r.out
    assert "2 passed, 1 failed, 0 skipped, 0 errors" in r.out  # per test, colour or not


def test_src_layout_with_generated_file_and_editable_install_is_proven(autopatch_bin,
                                                                      tmp_path):
    """A src-layout package whose import needs a file `setup` generates and an editable
    install (a .pth under HOME): setup runs in both trees and each tree's install points at
    that tree, so the pristine run imports the pristine code."""
    repo = make_repo(tmp_path, SRC_LAYOUT)
    s = script(
        write("tests/test_convert_km.py", """
            import units


            def test_km_to_cm():
                assert units.convert(1, "km", "cm") == 100000
            """),
        replace("src/units/__init__.py", "    return value * FACTORS[frm] * FACTORS[to]\n",
                "    return value * FACTORS[frm] / FACTORS[to]\n"),
        finish("tests/test_convert_km.py", "python3 -m pytest -q tests/test_convert_km.py"))
    r = fix(autopatch_bin, tmp_path, repo, UNITS_ISSUE, s,
            args=["--setup", "python3 tools/develop.py"])
    assert r.code == 0, r
    assert "round 1: proven" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "assert 10.0 == 100000" in ev  # the pristine tree imported the pristine code
    assert "| pristine | 2 | 0 | 0 | 0 | 0 |" in ev and "| patched | 2 | 0 | 0 | 0 | 0 |" in ev
    # setup ran once, in the workspace (the environment phase); every Tester run built its own
    # tree in its own box (baseline, pristine repro, patched repro, patched suite), got what
    # setup produced from the host's snapshot through the offline ENV_PREPARE_TREE_CMD, and
    # the editable install pointed at that tree
    assert "setup, in both trees: `d=$(pwd -P);" in ev
    setups = [e for e in events(r) if e["type"] == "tester_run" and e["kind"] == "setup"]
    assert [e["dir"] for e in setups] == ["/tmp/trees/pristine"] * 2 + ["/tmp/trees/patched"] * 2
    assert all(e["exit"] == 0 for e in setups), setups
    diff = r.out_path.read_text()
    assert "_table.py" not in diff and ".local" not in diff and ".pth" not in diff


def test_repro_that_skips_for_a_missing_module_is_refused(autopatch_bin, tmp_path):
    repo = make_repo(tmp_path, OPTIONAL)
    s = script(
        write("tests/test_sorted.py", """
            import pytest

            import report

            np = pytest.importorskip("numpy")


            def test_sorted_rows():
                assert report.to_rows({"b": 1, "a": 2}) == [["a", 2], ["b", 1]]
            """),
        replace("report.py", "    return [[k, data[k]] for k in data]\n",
                "    return [[k, data[k]] for k in sorted(data)]\n"),
        finish("tests/test_sorted.py", "python3 -m pytest -q tests/test_sorted.py"),
        finish("tests/test_sorted.py", "python3 -m pytest -q tests/test_sorted.py"))
    r = fix(autopatch_bin, tmp_path, repo, OPTIONAL_ISSUE, s, args=["--max-iterations", "2"])
    assert r.code == 1, r
    assert "round 1: rejected - the reproduction test was SKIPPED on the pristine code" in r.out, r
    # the Builder is told why, with pytest's own skip message
    feedback = tool_results(r.by_role("builder")[3])[-1]
    assert "SKIPPED on the pristine code" in feedback and "could not import 'numpy'" in feedback
    # round 2 resubmits the same test: the pristine result is reused, not run again
    repro = [e for e in events(r) if e["type"] == "tester_run" and e["kind"] == "repro"]
    assert len(repro) == 1, repro
    reason = r.out.split("NOT PROVEN:")[1]
    assert "SKIPPED on the pristine code" in reason and "PASSED" not in reason
    verdicts = [e for e in events(r) if e["type"] == "verdict"]
    assert verdicts and verdicts[-1]["proven"] is False


def test_twenty_thousand_tests_one_regression_is_named(autopatch_bin, tmp_path):
    """20,000 generated tests: no -rA, no scraping of truncated output; the one real
    regression is named, nothing else is blamed, and it does not take long."""
    repo = make_repo(tmp_path, BIG_SUITE)
    s = script(
        write("tests/test_halve_negative.py", """
            import mathx


            def test_halve_negative():
                assert mathx.halve(-3) == -1
            """),
        replace("mathx.py", "    return i // 2\n", "    return int(i / 2)\n"),
        # the real regression: one of the 20,000
        replace("mathx.py", "    return i + i\n", "    return i + i + (i == 12345)\n"),
        finish("tests/test_halve_negative.py",
               "python3 -m pytest -q tests/test_halve_negative.py"))
    r = fix(autopatch_bin, tmp_path, repo, BIG_ISSUE, s, args=["--max-iterations", "1"],
            timeout=900)
    assert r.code == 1, r
    assert "the patch breaks 1 test that passed before" in r.out, r
    assert "`tests.test_gen::test_double[12345]`: failed: assert 24691 == (2 * 12345)" in r.out
    assert "disappeared" not in r.out
    assert "%d passed, 0 failed" % BIG_N in r.out  # the baseline, per test
    runs = [e for e in events(r) if e["type"] == "tester_run" and e["kind"] == "suite"]
    suite_s = [e["millis"] / 1000 for e in runs]
    print("20k suite runs (s): %s; whole fix: %.1f s" % (suite_s, r.seconds))
    # the patched suite runs the repository's own tests (not the new repro): one broken
    assert len(runs) == 2 and runs[1]["passed"] == BIG_N - 1 and runs[1]["failed"] == 1
    assert r.seconds < 600, r.seconds


def test_javascript_project_without_node_is_an_environment_failure(autopatch_bin, tmp_path):
    """The suite cannot run at all (no toolchain in the image): the job stops before the
    Planner's first model call, before setup even, and says which flavour has the tool."""
    # the python flavour has no node: without `image:` the node flavour would be chosen
    repo = make_repo(tmp_path, dict(JS_PROJECT, **{".github/autopatch.yml": "image: python\n"}))
    s = script(write("x", "never"), finish("x", "x"))
    r = fix(autopatch_bin, tmp_path, repo, JS_ISSUE, s)
    assert r.code == 3, r
    assert len(r.requests) == 0  # not one model call
    assert ("ENVIRONMENT FAILURE (no model call was made): the test command `npm test` needs "
            "`npm`, which the sandbox image") in r.out
    assert "the node flavour has it: add `image: node` to .github/autopatch.yml" in r.out
    assert "[planning]" not in r.out and "[setup]" not in r.out


def test_javascript_project_gets_the_node_flavour_and_is_proven(autopatch_bin, tmp_path):
    """Without `image:`, package.json chooses the node flavour; node's own test runner
    reports per test, so the fix is proven from structured results."""
    repo = make_repo(tmp_path, JS_PROJECT)
    s = script(
        write("test/every_space.test.js", """
            const test = require("node:test");
            const assert = require("node:assert");
            const { slug } = require("..");
            test("every space", () => assert.strictEqual(slug("a b c"), "a-b-c"));
            """),
        replace("index.js", "replace(/ /, ", "replace(/ /g, "),
        finish("test/every_space.test.js", "node --test test/every_space.test.js"))
    r = fix(autopatch_bin, tmp_path, repo, JS_ISSUE, s)
    assert r.code == 0, r
    assert "flavour node" in r.out, r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "every space" in ev, ev

def hang_fix(autopatch_bin, tmp_path, issue, repro_timeout, args=()):
    """The countdown repository with repro_timeout in .github/autopatch.yml; a repro that
    loops forever on pristine and a fix that ends the loop."""
    repo = make_repo(tmp_path, dict(HANG, **{".github/autopatch.yml":
                                             "repro_timeout: %d\n" % repro_timeout}))
    s = script(
        write("tests/test_odd.py", """
            import steps


            def test_odd_terminates():
                assert steps.countdown(3) == 2
            """),
        replace("steps.py", "    while n != 0:\n", "    while n > 0:\n"),
        finish("tests/test_odd.py", "python3 -m pytest -q tests/test_odd.py"))
    return fix(autopatch_bin, tmp_path, repo, issue, s, args=args)


def test_hang_bug_is_accepted_with_the_timeout_as_evidence(autopatch_bin, tmp_path):
    r = hang_fix(autopatch_bin, tmp_path, HANG_ISSUE, 5)
    assert r.code == 0, r
    assert "from .github/autopatch.yml: repro_timeout 5 s" in r.out
    ev = r.out.split("=== Tester evidence ===")[1]
    assert "**timed out after 5 s before the patch**" in ev
    assert "**passes**" in ev
    repro = [e for e in events(r) if e["type"] == "tester_run" and e["kind"] == "repro"]
    assert repro[0]["timed_out"] is True and repro[0]["class"] == "killed by the deadline"
    assert repro[1]["timed_out"] is False and repro[1]["passed"] == 1


def test_timeout_is_no_reproduction_when_the_issue_is_not_about_a_hang(autopatch_bin,
                                                                       tmp_path):
    r = hang_fix(autopatch_bin, tmp_path, NOT_HANG_ISSUE, 3, args=["--max-iterations", "1"])
    assert r.code == 1, r
    assert ("rejected - the reproduction test was killed by the repro deadline "
            "(`repro_timeout`: 3 s) on the pristine code" in r.out), r
    assert "this issue does not describe one" in r.out


def test_failing_suite_without_per_test_results_needs_the_opt_in(autopatch_bin, tmp_path):
    """No per-test results and a suite that already fails: an environment failure (weak
    evidence) by default; with allow_weak_evidence the fix is proven and says it is weak."""
    broken = dict(C_PROJECT)
    broken["tests/test_broken.c"] = c_test("clamp(1, 2, 3)", "3")  # fails on pristine
    repo = make_repo(tmp_path, broken)
    s = script(write(C_REPRO, c_test("clamp(15, 0, 10)", "10")),
               replace("src/clamp.c", C_FIX_OLD, C_FIX_NEW), finish(C_REPRO, C_REPRO_CMD))
    r = fix(autopatch_bin, tmp_path, repo, C_ISSUE, s)
    assert r.code == 3, r
    assert len(r.requests) == 0
    assert "exit status 2, no per-test results" in r.out
    assert "allow_weak_evidence: true" in r.out

    weak_dir = tmp_path / "weak"
    weak_dir.mkdir()
    repo = make_repo(weak_dir, dict(broken, **{".github/autopatch.yml":
                                               "allow_weak_evidence: true\n"}))
    r = fix(autopatch_bin, weak_dir, repo, C_ISSUE, s)
    assert r.code == 0, r
    assert "WEAK EVIDENCE" in r.out and "**Weak evidence.**" in r.out
    assert re.search(r"- pristine: exit 2\n- patched: exit 2", r.out)


@pytest.mark.parametrize("shape", ["collection errors", "not executable", "out of memory"])
def test_suite_that_cannot_run_is_an_environment_failure(autopatch_bin, tmp_path, shape):
    """Other suites that cannot run at all are named for what they are, before any model
    call: import errors in every test module, a test script without its x bit, a suite the
    OOM killer ends (exit 137 with the box's oom_kill counter up; never "a failing test")."""
    files = {"lib.py": "def f():\n    return 1\n"}
    args, env = [], None
    if shape == "collection errors":
        for i in range(13):
            files["tests/test_m%d.py" % i] = "import yaml_that_is_not_installed\n"
        want = ["collection or import errors", "No module named 'yaml_that_is_not_installed'",
                "`setup:`"]
    elif shape == "not executable":
        files["run_tests.sh"] = "#!/bin/sh\npython3 -m pytest -q\n"
        args = ["--test", "./run_tests.sh"]
        want = ["not executable (exit 126)", "Permission denied", "file modes"]
    else:
        files["tests/test_big.py"] = ("def test_big():\n    b = bytearray(900 << 20)\n"
                                      "    assert len(b)\n")
        env = {"AUTOPATCH_SANDBOX_MEMORY": "300m"}
        want = ["killed: out of memory", "AUTOPATCH_SANDBOX_MEMORY"]
    repo = make_repo(tmp_path, files)
    if shape == "not executable":
        (repo / "run_tests.sh").chmod(0o644)
    r = fix(autopatch_bin, tmp_path, repo, "f() is wrong\n\nIt should return 2.\n",
            script(write("x", "never"), finish("x", "x")), args=args, env=env)
    assert r.code == 3, r
    assert len(r.requests) == 0
    for w in want:
        assert w in r.out, (w, r.out)
    assert "the test failed" not in r.out
