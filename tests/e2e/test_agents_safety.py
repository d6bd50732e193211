"""Agents safety end to end: the model API key reaches the model server and nowhere else
(stdout, trajectory, sandbox), and an interrupted `autopatch fix` leaves no container."""
import json
import signal
import subprocess
import time

from agents_util import (call, containers_of, fix_argv, fix_env, happy, make_calc_repo,
                         new_owner, run_fix, step, tool_results)
from model_stub import StubServer

KEY = "sk-agents-e2e-0123456789abcdefSECRET"


def test_api_key_goes_to_the_model_server_only(autopatch_bin, tmp_path):
    s = happy()
    # the model "leaks" the key back in its text and asks the box for its environment
    s["planner"][-1]["text"] = "Key seen: " + KEY + "\n" + s["planner"][-1]["text"]
    s["builder"].insert(0, step(call("run", command="env; cat /proc/1/environ | tr '\\0' '\\n'")))
    for provider, header, value in (("openai", "authorization", "Bearer " + KEY),
                                    ("anthropic", "x-api-key", KEY)):
        d = tmp_path / provider
        d.mkdir()
        r = run_fix(autopatch_bin, d, s, provider, env={"AUTOPATCH_LLM_API_KEY": KEY})
        assert r.code == 0, r
        assert all(q["headers"].get(header) == value for q in r.requests)
        env_dump = tool_results(r.by_role("builder")[1])[-1]
        assert "PATH=" in env_dump and KEY not in env_dump  # never inside the box
        assert KEY not in r.out and KEY not in r.err
        traj = r.traj_path.read_text()
        assert KEY not in traj
        assert "Key seen: ***" in traj  # redacted, not dropped
        assert json.loads(traj.splitlines()[-1])["proven"] is True


def test_interrupted_fix_removes_its_sandbox(autopatch_bin, tmp_path):
    s = happy()
    s["builder"] = [step(call("run", command="sleep 2; echo {n}"), repeat=True)]
    repo = make_calc_repo(tmp_path)
    stub = StubServer(s).start()
    owner = new_owner()
    try:
        p = subprocess.Popen(fix_argv(autopatch_bin, repo, tmp_path / "p.diff", tmp_path / "t.jsonl"),
                             cwd=tmp_path, env=fix_env(tmp_path, stub, "openai", owner),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in p.stdout:
            seen.append(line)
            if line.startswith("[building] run"):
                break
        assert containers_of(owner), "the box should exist while the job runs"
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 130, (p.returncode, out, err)
        assert time.time() - t0 < 30
        assert "NOT PROVEN" in out and "cancelled" in out
    finally:
        stub.stop()
        if p.poll() is None:
            p.kill()
    assert not containers_of(owner)
