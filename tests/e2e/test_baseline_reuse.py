"""The pristine suite's per-test results are reused across jobs (issue 26, "Performance";
job/baseline_cache.h): a second `autopatch fix` on the same commit, environment, image and test
command runs no baseline, and its verdict is still right (a planted regression is refused and
named); a changed test command, a new commit, a dirty checkout or a damaged entry runs the
baseline again, and the job says why (the part of the key that differs, or the entry). Real
binary, Docker sandbox and Tester; the scripted model stand-in."""
import json
import os
import subprocess

from proof_util import (PY_SHOP, SHOP_ISSUE, SHOP_REPRO as REPRO, SHOP_REPRO_CMD as REPRO_CMD,
                        finish, fix, make_repo, script, shop_fix_steps)


def shop_script(regression):
    return script(*shop_fix_steps(regression), finish(REPRO, REPRO_CMD))


def job(autopatch_bin, tmp_path, repo, regression=False, test_cmd="python3 -m pytest -q"):
    r = fix(autopatch_bin, tmp_path, repo, SHOP_ISSUE, shop_script(regression),
            args=["--max-iterations", "1", "--test", test_cmd])
    ev = [json.loads(x) for x in r.traj_path.read_text().splitlines()]
    base = [e for e in ev if e["type"] == "tester_baseline"]
    assert len(base) == 1, r
    pristine_suites = [e for e in ev if e["type"] == "tester_run" and e["kind"] == "suite"
                       and "pristine" in e["dir"]]
    r.reused = base[0]["reused"]
    r.miss = base[0].get("reuse_miss")
    if r.reused:  # no box ran the suite on pristine
        assert pristine_suites == [], pristine_suites
        assert "baseline: reused from an earlier job" in r.out, r
        assert r.miss is None, r.miss
    else:
        assert len(pristine_suites) == 1, pristine_suites
        assert "baseline: the suite ran on the unchanged code" in r.out, r
        # why it ran again: in the trajectory and on the job's progress line
        assert r.miss and "\n" not in r.miss, base
        assert "; not reused from an earlier job: " + r.miss in r.out, r
    return r


def entries(tmp_path):
    d = tmp_path / "data" / "baseline-cache"
    return sorted(d.iterdir()) if d.is_dir() else []


def commit(repo, path, text):
    (repo / path).write_text(text)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["add", "-A"], ["commit", "-qm", "next"]):
        subprocess.run(["git", "-C", str(repo)] + args, check=True, env=env)


def assert_refused(r):
    assert r.code == 1, r
    assert "the patch breaks 1 test that passed before" in r.out, r
    assert "`tests.test_shop::test_total`: failed" in r.out
    assert "test_tax_rounding" not in r.out.split("NOT PROVEN:")[1]


def test_second_job_on_the_same_commit_reuses_the_baseline_and_still_refuses_a_regression(
        autopatch_bin, tmp_path):
    repo = make_repo(tmp_path, PY_SHOP)
    first = job(autopatch_bin, tmp_path, repo, regression=True)
    assert not first.reused
    assert_refused(first)
    assert len(entries(tmp_path)) == 1
    second = job(autopatch_bin, tmp_path, repo, regression=True)
    assert second.reused
    assert_refused(second)  # the kept results still name the regression
    # the already-failing test is still known as such from the kept results
    assert "2 passed, 1 failed, 0 skipped, 0 errors" in second.out, second


def test_changed_inputs_or_a_damaged_entry_run_the_baseline_again(autopatch_bin, tmp_path):
    repo = make_repo(tmp_path, PY_SHOP)
    r = job(autopatch_bin, tmp_path, repo)
    assert not r.reused and r.miss == "no entry is kept for this repository yet", r.miss
    proven = job(autopatch_bin, tmp_path, repo)
    assert proven.reused and proven.code == 0, proven
    # another test command: its own baseline (and it becomes the kept one); the miss names
    # the test command, and only it
    r = job(autopatch_bin, tmp_path, repo, test_cmd="python3 -m pytest -q tests")
    assert not r.reused
    assert r.miss == ("the kept entry is for another test command (kept: python3 -m pytest -q, "
                      "now: python3 -m pytest -q tests)"), r.miss
    r = job(autopatch_bin, tmp_path, repo)
    assert not r.reused and "another test command (kept: python3 -m pytest -q tests," in r.miss
    # a new commit: the commit, and nothing else
    commit(repo, "README.md", "shop\n")
    r = job(autopatch_bin, tmp_path, repo)
    assert not r.reused and r.miss.startswith("the kept entry is for another commit (kept: "), r
    assert "image" not in r.miss and "test command" not in r.miss and "environment" not in r.miss
    # a checkout that is not exactly its commit (an untracked file) keeps nothing and reuses
    # nothing: the Tester copies the working tree
    (repo / "notes.txt").write_text("x\n")
    r = job(autopatch_bin, tmp_path, repo)
    assert not r.reused and "the checkout is not exactly its commit" in r.miss, r.miss
    (repo / "notes.txt").unlink()
    # a damaged entry is ignored; the baseline runs and the verdict is right
    [entry] = entries(tmp_path)
    data = entry.read_bytes()
    entry.write_bytes(data[:len(data) // 2])
    r = job(autopatch_bin, tmp_path, repo, regression=True)
    assert not r.reused and r.miss == "the kept entry is damaged", r.miss
    assert_refused(r)
    assert job(autopatch_bin, tmp_path, repo).reused  # the rewritten entry serves again
