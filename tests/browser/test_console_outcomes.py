"""Finished jobs as the console tells them, in headless Chromium: an environment failure (the
sentence says what failed and what to change), a refusal (the Tester's reason), the evidence
table and the rounds, the state with its reason in the list, and "show all" of an output
longer than the page shows (loaded in place; without JavaScript a plain link to the text).
The jobs are queued by signed deliveries to `autopatch serve` (no workers); their outcome and
trajectory are written into the database and the data folder as a run would leave them."""
import json
import sqlite3

from console_util import queue_job
from server_util import Server, free_port

LONG = "".join(f"Collecting package-{i} (from -r requirements.txt line {i})\n"
               for i in range(300))


def _trajectory(path, lines):
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    return str(path)


def test_outcomes_evidence_and_show_all(autopatch_bin, tmp_path, browser):
    admin = free_port()
    s = Server(autopatch_bin, tmp_path, free_port(),
               AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{admin}").start()
    try:
        env = queue_job(s, "octo/calc", 1, title="Parser rejects empty input")
        refused = queue_job(s, "octo/calc", 2, title="Sort is not stable")
        env_traj = _trajectory(tmp_path / "env.jsonl", [
            {"type": "sandbox_exec", "command": "pip install -r requirements.txt",
             "dir": "/repo", "exit": 1, "timed_out": False, "millis": 900,
             "stdout": LONG, "stderr": "ERROR: no network"},
            {"type": "tester_run", "kind": "suite", "dir": "/tmp/trees/pristine/repo",
             "command": "pytest", "exit": 4, "timed_out": False, "millis": 10},
            {"type": "end", "proven": False, "env_failure": True, "iterations": 0,
             "failure": "the test suite cannot start: pip cannot reach the package index"}])
        refused_traj = _trajectory(tmp_path / "refused.jsonl", [
            {"type": "tester_run", "kind": "repro", "dir": "/tmp/trees/pristine/repo",
             "command": "pytest tests/test_sort.py", "exit": 0, "timed_out": False,
             "millis": 10, "passed": 1, "failed": 0, "skipped": 0, "errors": 0},
            {"type": "verdict", "proven": False,
             "reason": "the reproduction test passes on the pristine code"},
            {"type": "end", "proven": False, "env_failure": False, "iterations": 3}])
        db = sqlite3.connect(s.db, timeout=10)
        with db:
            for job, traj, error in ((env, env_traj, "environment: pip cannot install"),
                                     (refused, refused_traj, "not proven")):
                db.execute("UPDATE jobs SET state='failed', stage='testing', error=? "
                           "WHERE id=?", (error, job))
                db.execute("INSERT INTO job_state(job, key, value) VALUES(?, 'trajectory', ?)",
                           (job, traj))
        db.close()
        out = browser("outcomes.mjs", console=f"http://127.0.0.1:{admin}", envJob=env,
                      refusedJob=refused)
        assert out["envOutcome"].startswith("Environment failure (not the patch's fault): "
                                            "the test suite cannot start"), out["envOutcome"]
        assert "What to change" in out["envOutcome"]
        assert out["envState"] == "failed"
        assert out["cutLength"] <= 2000 < len(LONG)
        assert out["showAllText"] == "Show all stdout"
        assert out["wholeInPlace"] == LONG
        assert out["refusedOutcome"] == ("Refused, no pull request: the reproduction test "
                                         "passes on the pristine code.")
        assert out["refusedEvidence"][0].startswith("Reproduction test")
        assert "exit 0: 1 passed, 0 failed" in out["refusedEvidence"][0]
        assert "not run" in out["refusedEvidence"][0]
        assert out["refusedRounds"] == "3"
        assert "failed: environment: pip cannot install" in out["listStates"]
        assert "failed: not proven" in out["listStates"]
        assert out["plainWhole"] == LONG
        for k in ("a11yEnv", "a11yRefused", "a11yList"):
            assert out[k] == [], (k, out[k])
    finally:
        s.stop()
