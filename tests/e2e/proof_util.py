"""Helpers for the proof end-to-end tests (test_proof.py): fixture repositories written here
(never copied from a project) with the shapes real repositories have, and `autopatch fix` runs
on them against the scripted model stand-in, reached through agents_util."""
import os
import pathlib
import subprocess
import textwrap

from agents_util import call, run_fix_on, step

PLAN = {"text": "Cause: see the issue.\nFiles: the module named in the issue.\n"
                "Reproduction test: one test that fails today.\nFix: the smallest change."}


def make_repo(root, files, name="repo"):
    """A fresh git repository (one commit) holding files {path: text}."""
    repo = pathlib.Path(root) / name
    for path, text in files.items():
        f = repo / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text).lstrip("\n") if isinstance(text, str) else text)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo)] + args, check=True, env=env)
    return repo


def script(*builder_steps):
    """A model script: the one-reply plan, then the Builder's steps in order."""
    return {"planner": [PLAN], "builder": [step(*s) if isinstance(s, tuple) else step(s)
                                           for s in builder_steps]}


def write(path, content):
    return call("write_file", path=path, content=textwrap.dedent(content).lstrip("\n"))


def replace(path, old, new):
    return call("replace_in_file", path=path, old=old, new=new)


def finish(test_path, test_command, summary="fix"):
    return call("finish", test_path=test_path, test_command=test_command, summary=summary)


def fix(autopatch_bin, tmp_path, repo, issue, model_script, args=(), env=None, timeout=600):
    """`autopatch fix` on repo with the issue text; returns a FixRun with .seconds."""
    issue_file = tmp_path / "ISSUE.md"
    issue_file.write_text(textwrap.dedent(issue).lstrip("\n"))
    return run_fix_on(autopatch_bin, tmp_path, repo, model_script, "openai", env, args, timeout,
                      issue_file)


# ---- fixture repositories ------------------------------------------------------------------

C_PROJECT = {
    ".gitignore": "build/\n",
    "Makefile": """
        CC ?= cc
        CFLAGS ?= -O0 -g -Wall -Werror -Isrc
        TESTS := $(wildcard tests/test_*.c)
        BINS := $(patsubst tests/%.c,build/%,$(TESTS))

        .PHONY: test run
        # build every test binary, then run each one: a non-zero exit fails the target
        test: $(BINS)
        \t@set -e; for t in $(BINS); do echo "== $$t"; ./$$t; done

        # one test: make run T=tests/test_x.c
        run: build/$(notdir $(basename $(T)))
        \t./build/$(notdir $(basename $(T)))

        build/%: tests/%.c src/clamp.c src/clamp.h
        \t@mkdir -p build
        \t$(CC) $(CFLAGS) -o $@ $< src/clamp.c
        """,
    "src/clamp.h": """
        #ifndef CLAMP_H
        #define CLAMP_H
        /* v limited to [lo, hi]. */
        int clamp(int v, int lo, int hi);
        #endif
        """,
    "src/clamp.c": """
        #include "clamp.h"

        int clamp(int v, int lo, int hi)
        {
        \tif (v < lo)
        \t\treturn lo;
        \tif (v > hi)
        \t\treturn lo;
        \treturn v;
        }
        """,
    "tests/check.h": """
        #include <stdio.h>
        static int failures;
        #define CHECK_EQ(expr, want)                                                      \\
        \tdo {                                                                          \\
        \t\tint got_ = (expr);                                                            \\
        \t\tif (got_ != (want)) {                                                       \\
        \t\t\tprintf("FAIL: %s = %d, want %d\\n", #expr, got_, (want));                 \\
        \t\t\tfailures++;                                                             \\
        \t\t}                                                                           \\
        \t} while (0)
        """,
    "tests/test_clamp.c": """
        #include "check.h"
        #include "clamp.h"

        int main(void)
        {
        \tCHECK_EQ(clamp(5, 0, 10), 5);
        \tCHECK_EQ(clamp(-3, 0, 10), 0);
        \tCHECK_EQ(clamp(0, 0, 10), 0);
        \tprintf("%s\\n", failures ? "FAILED" : "ok");
        \treturn failures != 0;
        }
        """,
}
C_ISSUE = """
    clamp() returns the lower bound for values above the range

    clamp(15, 0, 10) returns 0; it should return 10.
    """

PY_SHOP = {
    "pytest.ini": """
        [pytest]
        addopts = --color=yes -ra
        """,
    "shop.py": """
        def total(prices):
            return round(sum(prices), 2)


        def discount(price, percent):
            return price - price * percent // 100


        def tax(amount):
            return amount * 0.2
        """,
    "tests/__init__.py": "",
    "tests/test_shop.py": """
        import shop


        def test_total():
            assert shop.total([1.25, 2.5]) == 3.75


        def test_discount_whole():
            assert shop.discount(200, 10) == 180


        def test_tax_rounding():
            # already failing before anyone touches the code: a known bug, tracked elsewhere
            assert shop.tax(0.1) == 0.02
        """,
}
SHOP_ISSUE = """
    discount() drops the fraction

    discount(19.99, 10) returns 18.99 instead of 17.991: the percentage is applied with floor
    division.
    """
SHOP_REPRO = "tests/test_discount_fraction.py"
SHOP_REPRO_CMD = "python3 -m pytest -q " + SHOP_REPRO


def shop_fix_steps(regression=False):
    """The Builder's steps that fix SHOP_ISSUE with a new repro test; with regression, total()
    also loses its rounding, so tests.test_shop::test_total breaks."""
    steps = [
        write(SHOP_REPRO, """
            import shop


            def test_fraction_kept():
                assert abs(shop.discount(19.99, 10) - 17.991) < 1e-9
            """),
        replace("shop.py", "    return price - price * percent // 100\n",
                "    return price - price * percent / 100\n")]
    if regression:
        steps.append(replace("shop.py", "    return round(sum(prices), 2)\n",
                             "    return sum(prices) + 0.001\n"))
    return steps

SRC_LAYOUT = {
    ".gitignore": "src/units/_table.py\n",
    "pyproject.toml": """
        [project]
        name = "units"
        version = "0.1"

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        """,
    "data/factors.csv": "m,1\nkm,1000\ncm,0.01\n",
    # What `pip install -e .` does, without pip: a .pth file in the user site (under HOME)
    # pointing at this tree's src/, and the generated table the package imports.
    "tools/develop.py": """
        import csv, os, pathlib, site

        root = pathlib.Path(__file__).resolve().parent.parent
        rows = list(csv.reader((root / "data" / "factors.csv").open()))
        (root / "src" / "units" / "_table.py").write_text(
            "FACTORS = {%s}\\n" % ", ".join("%r: %s" % (k, v) for k, v in rows))
        user = pathlib.Path(site.getusersitepackages())
        user.mkdir(parents=True, exist_ok=True)
        (user / "units-dev.pth").write_text(str(root / "src") + "\\n")
        print("units: editable install of", root / "src")
        """,
    "src/units/__init__.py": """
        from ._table import FACTORS


        def convert(value, frm, to):
            return value * FACTORS[frm] * FACTORS[to]
        """,
    "tests/test_units.py": """
        import units


        def test_same_unit():
            assert units.convert(3, "m", "m") == 3


        def test_table_is_generated():
            assert units.FACTORS["km"] == 1000
        """,
}
UNITS_ISSUE = """
    convert() multiplies by the target factor

    units.convert(1, "km", "cm") returns 10 instead of 100000.
    """

OPTIONAL = {
    "report.py": """
        def to_rows(data):
            return [[k, data[k]] for k in data]
        """,
    "tests/test_report.py": """
        import report


        def test_rows():
            assert report.to_rows({"a": 1}) == [["a", 1]]
        """,
}
OPTIONAL_ISSUE = """
    to_rows() does not sort the keys

    report.to_rows({"b": 1, "a": 2}) keeps insertion order; the rows must be sorted by key.
    """

BIG_N = 20000


def gen_suite(n):
    """A package whose suite is n generated tests (parametrised), for the large-suite shape
    and the benchmark."""
    return {
        "mathx.py": """
            def double(i):
                return i + i


            def halve(i):
                return i // 2
            """,
        "tests/__init__.py": "",
        "tests/test_gen.py": """
            import pytest

            import mathx


            @pytest.mark.parametrize("i", range(%d))
            def test_double(i):
                assert mathx.double(i) == 2 * i
            """ % n,
    }


BIG_SUITE = gen_suite(BIG_N)
BIG_ISSUE = """
    halve() rounds negative numbers down

    mathx.halve(-3) returns -2; it should truncate toward zero and return -1.
    """

JS_PROJECT = {
    "package.json": """
        {
          "name": "slugs",
          "version": "1.0.0",
          "scripts": {"test": "node --test test/"}
        }
        """,
    "index.js": """
        exports.slug = (s) => s.toLowerCase().replace(/ /, "-");
        """,
    "test/slug.test.js": """
        const test = require("node:test");
        const assert = require("node:assert");
        const { slug } = require("..");
        test("one space", () => assert.strictEqual(slug("A b"), "a-b"));
        """,
}
JS_ISSUE = """
    slug() replaces only the first space

    slug("a b c") returns "a-b c".
    """

HANG = {
    "steps.py": """
        def countdown(n):
            \"\"\"Count n down to zero in steps of two; the number of steps.\"\"\"
            steps = 0
            while n != 0:
                n -= 2
                steps += 1
            return steps
        """,
    "tests/test_steps.py": """
        import steps


        def test_even():
            assert steps.countdown(4) == 2
        """,
}
HANG_ISSUE = """
    countdown() hangs forever for odd numbers

    steps.countdown(3) never returns: it loops past zero.
    """
NOT_HANG_ISSUE = """
    countdown() gives the wrong count for odd numbers

    steps.countdown(3) should be 2.
    """
