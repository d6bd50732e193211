"""A cancel stops a running sandbox command at once, not when the command ends.

The Builder's scripted `run` is `sleep 120`; the cancel (the label removed, or Ctrl-C on
`autopatch fix`) comes while it sleeps. The fixer's stop check is wired into every sandbox
command it runs (sbx_cmd.cancel), so the command is killed with its box within a second or two:
the job ends cancelled, no pull request, no container left, and the comment says so. Without
that hook the job would wait for the sleep (up to the `run` timeout, 120 s).

Real `autopatch serve` / `autopatch fix`, real SQLite, real Docker; only GitHub's API and the
model are local stand-ins.
"""
import signal
import subprocess
import time

import pytest

from agents_util import containers_of, fix_argv, fix_env, happy, make_calc_repo, new_owner
from model_stub import StubServer
from pipeline_util import Rig, happy_script, job_events

MARKER = "<!-- autopatch:progress -->"
SLEEP = "sleep 120"


def sleeping_builder(script):
    """The happy session whose Builder first runs `sleep 120` in the sandbox."""
    script["builder"].insert(0, {"tool_calls": [{"name": "run",
                                                 "arguments": {"command": SLEEP}}]})
    return script


def wait_sleeping(containers, timeout=30):
    """Until one of the containers runs `sleep 120` (docker top); the command is running."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in containers():
            top = subprocess.run(["docker", "top", c], capture_output=True, text=True)
            if SLEEP in top.stdout:
                return
        time.sleep(0.2)
    raise AssertionError("the sandbox never ran `%s`" % SLEEP)


@pytest.fixture
def rig(tmp_path, autopatch_bin):
    r = Rig(tmp_path / "rig", autopatch_bin, script=sleeping_builder(happy_script()))
    r.tmp.mkdir(parents=True)
    try:
        yield r.start()
    finally:
        r.stop()


def test_unlabel_kills_the_running_command_and_cancels_the_job(rig):
    assert rig.label() == 202
    rig.wait(lambda: any(SLEEP in m for m in job_events(rig, 1)), 180,
             "the job event log to show the Builder's run")
    wait_sleeping(lambda: rig.containers(job="job-1") or rig.containers())
    t0 = time.time()
    assert rig.unlabel() == 200
    rig.wait(lambda: rig.job_done(1), 30, "the cancel")
    took = time.time() - t0
    assert took < 15, "the cancel waited %.1f s for the running command" % took
    assert rig.jobs()[0]["state"] == "cancelled", rig.jobs()
    builder_calls = [r for r in rig.model.requests() if r["role"] == "builder"]
    assert len(builder_calls) == 1, "the Builder went on after the cancel"
    assert rig.pulls() == []
    assert rig.containers(job="job-1") == []
    rig.wait(lambda: rig.boxes_left(1) == [], 15, "no container of the job left")

    def cancelled_comment():
        prog = [c for c in rig.bot_comments(1) if MARKER in c["body"]]
        return prog if prog and "cancelled" in prog[0]["body"] else None

    prog = rig.wait(cancelled_comment, 15, "the progress comment to say cancelled")
    assert len(prog) == 1
    assert "No pull request was opened" in prog[0]["body"]


@pytest.mark.parametrize("where", ["builder run", "tester suite"])
def test_ctrl_c_on_fix_kills_the_running_command(autopatch_bin, tmp_path, where):
    # The Builder's `run` sleeps, or the repository's test command does (the Tester runs it
    # on the pristine copy for the baseline, with the suite deadline, before any model call).
    if where == "builder run":
        script, args, stage, builder_calls = sleeping_builder(happy()), (), "[building] run", 1
    else:
        script, stage = happy(), "[preparing] baseline: running"
        args = ("--test", SLEEP + "; python3 -m pytest -q")
        builder_calls = 0  # the baseline comes before the Planner and the Builder
    repo = make_calc_repo(tmp_path)
    stub = StubServer(script).start()
    owner = new_owner()
    p = subprocess.Popen(fix_argv(autopatch_bin, repo, tmp_path / "p.diff", tmp_path / "t.jsonl",
                                  args),
                         cwd=tmp_path, env=fix_env(tmp_path, stub, "openai", owner),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stdout:
            if line.startswith(stage) and (where != "builder run" or SLEEP in line):
                break
        wait_sleeping(lambda: containers_of(owner))
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("`autopatch fix` still waits for the running command 30 s after ^C")
        took = time.time() - t0
        assert p.returncode == 130, (p.returncode, out, err)
        assert took < 10, "^C waited %.1f s for the running command" % took
        assert "NOT PROVEN" in out and "cancelled" in out, out
        assert len([r for r in stub.requests() if r["role"] == "builder"]) == builder_calls
    finally:
        stub.stop()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not containers_of(owner)
