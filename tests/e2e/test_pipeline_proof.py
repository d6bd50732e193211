"""`autopatch serve` shows what the Tester decided (issue 10): an environment failure stops the
job before any model call and the comment says what to change; a fix proven on weak evidence
(by the repository's opt-in) opens a PR whose body warns first.

Real `autopatch serve`, real SQLite, real Docker sandbox; GitHub and the model are stand-ins
(tests/e2e/pipeline_util.py)."""
import pytest

from pipeline_util import Rig, happy_script, job_events

MARKER = "<!-- autopatch:progress -->"


@pytest.fixture
def rig_factory(tmp_path, autopatch_bin):
    rigs = []

    def make(script=None, env=None, files=None):
        rig = Rig(tmp_path / f"rig{len(rigs)}", autopatch_bin, script=script, env=env,
                  files=files)
        rig.tmp.mkdir(parents=True)
        rigs.append(rig)
        return rig.start(serve=True)

    yield make
    for r in rigs:
        r.stop()


def test_environment_failure_stops_the_job_before_any_model_call(rig_factory):
    rig = rig_factory(files={".github/autopatch.yml": "test: npm test\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed", job_events(rig, 1)
    assert rig.model.requests() == [], "no model call for an environment problem"
    assert rig.pulls() == []
    text = [c for c in rig.bot_comments(1) if MARKER in c["body"]][0]["body"]
    assert "environment failure" in text, text
    assert "command not found (exit 127)" in text and "npm: not found" in text
    assert "`image:`" in text  # what to change
    events = job_events(rig, 1)
    assert any("baseline" in m for m in events), events
    assert "autopatch: failed" in rig.state()["issues"]["1"]["labels"]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_weak_evidence_opt_in_puts_a_warning_at_the_top_of_the_pr(rig_factory):
    # A legacy check without per-test results that already fails: proven only because the
    # repository opts in, and the PR says so before anything else.
    files = {
        ".github/autopatch.yml": "test: python3 tests/legacy_check.py\n"
                                 "allow_weak_evidence: true\n",
        "tests/legacy_check.py": "import calc\nprint('legacy check: 1 known failure')\n"
                                 "raise SystemExit(1)\n",
    }
    rig = rig_factory(script=happy_script(), files=files)
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    assert rig.jobs()[0]["state"] == "succeeded", job_events(rig, 1)
    body = rig.pulls()[0]["body"]
    assert body.startswith("> [!WARNING]\n> **Weak evidence.**"), body[:300]
    assert "allow_weak_evidence: true" in body
    assert "- pristine: exit 1\n- patched: exit 1" in body
    assert "ZeroDivisionError" in body  # the repro's failure on pristine, per test
