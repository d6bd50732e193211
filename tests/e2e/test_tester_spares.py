"""Spare Tester boxes (issue 26, "Performance"; job/tester_box.h): a job keeps
AUTOPATCH_TESTER_SPARES fresh Tester boxes made ahead of time, its Tester runs take them, and
none is left after the job - proven, refused, stopped by a budget or cancelled - through `fix`
and through `serve`. Real binary, Docker sandbox and Tester; the scripted model stand-in."""
import re
import time

import pytest

from agents_util import call
from pipeline_util import Rig, happy_script, job_events
from proof_util import (PY_SHOP, SHOP_ISSUE, SHOP_REPRO as REPRO, SHOP_REPRO_CMD as REPRO_CMD,
                        finish, fix, make_repo, script, shop_fix_steps)
LINE = re.compile(r"Tester boxes: (\d+) fresh box(?:es)? for (\d+) runs?, (\d+) of them made "
                  r"ahead of time; (\d+) spares? destroyed unused")


def shop_script(regression=False, pause_s=4):
    """A fix of shop.discount (with a regression in total() when asked); the Builder waits
    pause_s seconds in its box before finish, long enough for the spares to be ready."""
    steps = shop_fix_steps(regression)
    steps.append(call("run", command="sleep %d" % pause_s))
    steps.append(finish(REPRO, REPRO_CMD))
    return script(*steps)


def counts(text):
    """(made, runs, warm, dropped) from the job's "Tester boxes" line."""
    found = LINE.findall(text)
    assert len(found) == 1, text[-3000:]
    made, runs, warm, dropped = (int(x) for x in found[0])
    assert made == runs
    return made, warm, dropped


def run_job(autopatch_bin, tmp_path, spares=None, regression=False, env=None, args=()):
    e = dict(env or {})
    if spares is not None:
        e["AUTOPATCH_TESTER_SPARES"] = str(spares)
    # fix() asserts that no container of the run (label autopatch.owner) is left behind.
    return fix(autopatch_bin, tmp_path, make_repo(tmp_path, PY_SHOP), SHOP_ISSUE,
               shop_script(regression), args=["--max-iterations", "1", *args], env=e)


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_tester_runs_take_spares_made_ahead_and_none_is_left(autopatch_bin, tmp_path, runtime):
    r = run_job(autopatch_bin, tmp_path, env={"AUTOPATCH_SANDBOX_RUNTIME": runtime})
    assert r.code == 0 and "PROVEN" in r.out, r
    made, warm, dropped = counts(r.out)
    # the baseline, then the round: pristine repro, patched repro, patched suite
    assert made == 4, r.out
    # The Builder's 4 s pause lets both spares get ready: the round's two lanes start on
    # them (the baseline takes the one being made when it asks, or makes its own).
    assert warm >= 2, r.out
    # Refilled after each take, never beyond the two: what is left at the end is destroyed.
    assert 1 <= dropped <= 2, r.out


def test_no_spares_makes_every_box_on_demand(autopatch_bin, tmp_path):
    r = run_job(autopatch_bin, tmp_path, spares=0)
    assert r.code == 0 and "PROVEN" in r.out, r
    assert counts(r.out) == (4, 0, 0), r.out


def test_a_refused_job_leaves_no_spare(autopatch_bin, tmp_path):
    r = run_job(autopatch_bin, tmp_path, regression=True)
    assert r.code == 1 and "the patch breaks 1 test that passed before" in r.out, r
    made, warm, dropped = counts(r.out)
    assert made == 4 and warm >= 2 and dropped >= 1, r.out


def test_a_job_stopped_by_its_budget_destroys_its_spares(autopatch_bin, tmp_path):
    # The Builder's sleep outlasts the wall-time budget, which stops the job once it returns.
    s = shop_script(pause_s=14)
    r = fix(autopatch_bin, tmp_path, make_repo(tmp_path, PY_SHOP), SHOP_ISSUE, s,
            args=["--max-iterations", "1"], env={"AUTOPATCH_MAX_WALL_SECONDS": "10"})
    assert r.code == 1 and "wall-time budget exhausted" in r.out, r
    made, warm, dropped = counts(r.out)
    assert made == 1, r.out  # the baseline only
    assert dropped == 2, r.out  # both spares were ready, unused, and are gone


def test_a_spare_too_old_is_replaced_by_a_fresh_one(autopatch_bin, tmp_path):
    # Box life 90 s: a spare is kept at most 15 s, then destroyed and made anew, so the Tester
    # never gets a box whose life ran down while the Builder worked (22 s here).
    r = fix(autopatch_bin, tmp_path, make_repo(tmp_path, PY_SHOP), SHOP_ISSUE,
            shop_script(pause_s=22), args=["--max-iterations", "1"],
            env={"AUTOPATCH_SANDBOX_WALL_SECONDS": "90"})
    assert r.code == 0 and "PROVEN" in r.out, r
    made, warm, dropped = counts(r.out)
    assert made == 4 and warm >= 2, r.out
    # the two left at the end, and at least one replaced during the pause
    assert dropped >= 3, r.out




# ---- through `serve` ----------------------------------------------------------------------


@pytest.fixture
def rig(tmp_path, autopatch_bin):
    rigs = []

    def make(script):
        rg = Rig(tmp_path / f"rig{len(rigs)}", autopatch_bin, script=script)
        rg.tmp.mkdir(parents=True)
        rigs.append(rg)
        return rg.start()

    yield make
    for rg in rigs:
        rg.stop()


def slow_builder(seconds):
    s = happy_script()
    s["builder"].insert(0, {"tool_calls": [{"name": "run",
                                             "arguments": {"command": f"sleep {seconds}"}}]})
    return s


def wait_spares(rg):
    """The job's boxes while the Builder sleeps: its own and its two ready spares (the
    baseline's box is gone by then)."""
    rg.wait(lambda: len(rg.containers(job="job-1")) == 3, 120,
            "the job's box and its two spare Tester boxes")


def events_line(rg):
    return "\n".join(m for m in job_events(rg, 1) if m.startswith("Tester boxes:"))


def test_serve_job_uses_spares_and_leaves_no_box(rig):
    rg = rig(slow_builder(8))
    assert rg.label() == 202
    wait_spares(rg)
    rg.wait(lambda: rg.job_done(1), 300, "the job to finish")
    assert rg.jobs()[0]["state"] == "succeeded", rg.jobs()
    made, warm, dropped = counts(events_line(rg))
    assert made == 4 and warm >= 2 and dropped >= 1, events_line(rg)
    rg.wait(lambda: rg.containers(job="job-1") == [], 60, "no container of the job left")


def test_serve_cancelled_job_destroys_its_spares(rig):
    rg = rig(slow_builder(60))
    assert rg.label() == 202
    wait_spares(rg)
    t0 = time.time()
    assert rg.comment(1, "/autopatch stop") == 200
    rg.wait(lambda: rg.job_done(1), 120, "the cancel")
    assert rg.jobs()[0]["state"] == "cancelled", rg.jobs()
    assert time.time() - t0 < 45
    made, warm, dropped = counts(events_line(rg))
    assert made == 1 and dropped == 2, events_line(rg)  # the baseline's; both spares unused
    rg.wait(lambda: rg.containers(job="job-1") == [], 60, "no container of the job left")
