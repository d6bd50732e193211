"""Where the test command comes from, as a person sees it (issue 27 items 1 and 4): `autopatch
fix` names the workflow file, job and step it took the command from, and when that command
cannot run on the unchanged code, `serve`'s comment names the same source, shows the runner's
own error lines without colour codes, and gives advice that fits the cause."""
import os
import subprocess

from agents_util import make_calc_repo
from pipeline_util import Rig, job_events

MARKER = "<!-- autopatch:progress -->"

WORKFLOW = """name: CI
on: [push, pull_request]
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install ruff
      - run: ruff check .
  tests:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        python: ["3.11", "3.12"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - name: Install
        run: pip install -e .[test]
      - name: Run tests
        run: %s
      - name: Upload coverage
        run: codecov -t ${{ secrets.CODECOV_TOKEN }}
"""


def test_fix_names_the_workflow_step(autopatch_bin, tmp_path):
    # Docker is unreachable: fix ends right after choosing the test command.
    repo = make_calc_repo(tmp_path, {
        ".github/workflows/ci.yml": WORKFLOW % "PYVER=${{ matrix.python }} python3 -m pytest -q tests",
        "Makefile": "test:\n\tfalse\n"})
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "DOCKER_HOST": "unix://%s" % (tmp_path / "no-docker.sock")}
    p = subprocess.run([str(autopatch_bin), "fix", "--repo", str(repo), "--issue", "x"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert ('test command: PYVER=3.11 python3 -m pytest -q tests (detected: '
            '.github/workflows/ci.yml job tests, step "Run tests"; matrix.python = 3.11 '
            '(the first of 2 values))\n') in p.stdout, p.stdout


# What `mvn` prints offline, in colour, reduced to its shape: a script stands in for Maven so
# the default (python) image can run it.
SUITE_SH = r"""#!/bin/sh
e=$(printf '\033')
echo "[${e}[1;34mINFO${e}[m] Scanning for projects..."
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25; do
  echo "[${e}[1;34mINFO${e}[m] Downloading from central: module $i"
done
echo "[${e}[1;31mERROR${e}[m] Plugin org.apache.maven.plugins:maven-surefire-plugin:3.2.5 or one of its dependencies could not be resolved: Could not transfer artifact org.apache.maven.plugins:maven-surefire-plugin:pom:3.2.5 -> [${e}[1mHelp 1${e}[m]"
echo "[${e}[1;31mERROR${e}[m] To see the full stack trace of the errors, re-run Maven with the -e switch."
exit 1
"""


def test_environment_failure_names_the_source_and_the_runners_error(tmp_path, autopatch_bin):
    files = {".github/workflows/ci.yml": WORKFLOW % "sh ci/suite.sh", "ci/suite.sh": SUITE_SH}
    rig = Rig(tmp_path / "rig", autopatch_bin, files=files)
    rig.tmp.mkdir(parents=True)
    try:
        rig.start()
        assert rig.label() == 202
        rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
        assert rig.jobs()[0]["state"] == "failed", job_events(rig, 1)
        assert rig.model.requests() == [], "no model call for an environment problem"
        text = [c for c in rig.bot_comments(1) if MARKER in c["body"]][0]["body"]
        # where the command came from
        assert ('detected `sh ci/suite.sh` from .github/workflows/ci.yml job tests, step '
                '"Run tests"') in text, text
        # the runner's error, not its first lines, and no colour codes
        assert "environment failure" in text, text
        assert "the runner's error lines:" in text, text
        assert ("[ERROR] Plugin org.apache.maven.plugins:maven-surefire-plugin:3.2.5 or one of "
                "its dependencies could not be resolved") in text, text
        assert "\x1b" not in text and "[1;31m" not in text, text
        assert "Scanning for projects" not in text and "To see the full stack trace" not in text
        # advice that fits: fetch it in setup, with its host under network
        assert "Maven could not fetch what the run needs" in text, text
        assert "`network:`" in text and "`setup:`" in text, text
        rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")
    finally:
        rig.stop()
