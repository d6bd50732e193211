"""End to end: label an issue, get one proven draft PR; duplicates, crashes, cancel, publish
retries, iteration on the PR, and no secret anywhere it could leak.

Real `autopatch serve`, real SQLite, real Docker sandbox, real git over HTTP (the stand-in's
`git http-backend`); only GitHub's API and the model are local stand-ins.
"""
import json
import pathlib
import os
import re
import signal
import subprocess
import time
import uuid

import pytest

from pipeline_util import (REPO, Rig, commit_to_branch, happy_script, human_comment,
                           job_events)
from sandbox_util import BACKENDS

BRANCH = "autopatch/issue-1"
MARKER = "<!-- autopatch:progress -->"


@pytest.fixture
def rig_factory(tmp_path, autopatch_bin):
    rigs = []

    def make(script=None, env=None, serve=True, files=None, ghes=False, stub=None):
        rig = Rig(tmp_path / f"rig{len(rigs)}", autopatch_bin, script=script, env=env,
                  files=files, ghes=ghes, stub=stub)
        rig.tmp.mkdir(parents=True)
        rigs.append(rig)
        return rig.start(serve=serve)

    yield make
    for r in rigs:
        r.stop()


def slow_builder_script(seconds=25):
    """The happy session with a Builder step that runs `sleep` in the sandbox first."""
    s = happy_script()
    s["builder"].insert(0, {"tool_calls": [{"name": "run",
                                             "arguments": {"command": f"sleep {seconds}"}}]})
    return s


def iteration_steps():
    """What the model answers for `/autopatch make it raise ValueError instead`."""
    # The Tester refuses a patch that loses a test which passed before, so the earlier
    # reproduction test keeps its name and changes what it expects.
    test = ("import pytest\n\nimport calc\n\n\n"
            "def test_mean_of_empty_list_is_zero():  # now: raises ValueError\n"
            "    with pytest.raises(ValueError):\n        calc.mean([])\n")
    planner = [{"text": "Cause: mean() returns 0.0 for an empty list; the reviewer wants a "
                        "ValueError.\nFiles: calc.py\nReproduction test: "
                        "tests/test_mean_empty.py expects ValueError.\nFix: raise ValueError."}]
    builder = [
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "tests/test_mean_empty.py", "content": test}}]},
        {"tool_calls": [{"name": "replace_in_file", "arguments": {
            "path": "calc.py", "old": "        return 0.0\n",
            "new": "        raise ValueError(\"mean of no values\")\n"}}]},
        {"tool_calls": [{"name": "finish", "arguments": {
            "test_path": "tests/test_mean_empty.py",
            "test_command": "python3 -m pytest -q tests/test_mean_empty.py",
            "summary": "mean([]) now raises ValueError, as the review asked."}}]},
        {"text": "Done."},
    ]
    return planner, builder


def wait_builder_started(rig):
    rig.wait(lambda: any(r["role"] == "builder" for r in rig.model.requests()), 180,
             "the Builder's first model request")


def progress_comments(rig, number=1):
    return [c for c in rig.bot_comments(number) if MARKER in c["body"]]


# The happy path runs on each sandbox backend (Kubernetes: pods of the API stand-in); GHES is
# a GitHub side matter, so it runs on the Docker backend only (not collected for Kubernetes,
# rather than skipped).
@pytest.mark.parametrize("github,backend", [("dotcom", b) for b in BACKENDS] +
                         [("ghes", "docker")] * ("docker" in BACKENDS))
def test_label_opens_exactly_one_proven_draft_pr(rig_factory, github, backend, k8s_stub):
    # ghes: the stand-in serves the REST API under /api/v3 only (web and git at the root, as
    # GitHub Enterprise Server does) and autopatch is given only GITHUB_URL.
    rig = rig_factory(ghes=github == "ghes",
                      stub=k8s_stub() if backend == "kubernetes" else None)
    delivery = str(uuid.uuid4())
    assert rig.label(delivery=delivery) == 202
    # GitHub redelivers with the same id: accepted as a duplicate, never a second job.
    assert rig.label(delivery=delivery) == 200
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    jobs = rig.jobs()
    assert len(jobs) == 1 and jobs[0]["state"] == "succeeded", jobs

    pulls = rig.pulls()
    assert len(pulls) == 1, pulls
    pr = pulls[0]
    assert pr["head"]["ref"] == BRANCH
    assert pr["base"]["ref"] == "main"
    assert pr["draft"] is True
    assert pr["title"] == f"Fix #1: {rig.title}"
    body = pr["body"]
    for part in ("### Summary", "### Suspected cause", "### Reproduction test",
                 "### Evidence", "### Files changed", "`calc.py`", "Fixes #1", "scripted-calc",
                 "tokens:"):
        assert part in body, (part, body)
    assert "tests/test_mean_empty.py" in body
    # The evidence itself: the repro test fails on the pristine code and passes patched, and
    # the suite lost nothing.
    assert re.search(r"^- pristine code: \*\*fails\*\* in the test", body, re.M), body
    assert "`tests.test_mean_empty::test_mean_of_empty_list_is_zero` failed" in body
    assert re.search(r"^- patched code: \*\*passes\*\* .*exit 0\)", body, re.M), body
    assert "ZeroDivisionError" in body  # the pristine failure's message is quoted
    assert "every test that passed before the patch passes after it" in body
    assert "| pristine | 7 | 0 | 0 | 0 | 0 |" in body
    create = [r for r in rig.gh.requests()
              if r["method"] == "POST" and r["path"] == f"/repos/{REPO}/pulls"]
    assert len(create) == 1
    assert create[0]["body"]["maintainer_can_modify"] is True, create[0]["body"]
    assert create[0]["body"]["draft"] is True

    files = rig.branch_files(BRANCH)
    assert set(files) == {"calc.py", "tests/test_mean_empty.py"}, files
    assert "return 0.0" in files["calc.py"]
    assert len(rig.branch_log(BRANCH)) == 1

    # One progress comment, edited in place, ending with the PR link; at most two by the App.
    comments = rig.bot_comments(1)
    assert 1 <= len(comments) <= 2, comments
    prog = progress_comments(rig)
    assert len(prog) == 1
    text = prog[0]["body"]
    assert "opened a pull request" in text
    assert pr["html_url"] in text
    assert text.count("- [x] ") == 5, text
    assert "Latest Tester verdict" in text and "proven" in text
    assert "detected `python3 -m pytest -q`" in text  # no config file: says what was chosen
    assert prog[0]["updated_at"] >= prog[0]["created_at"]
    patches = [r for r in rig.gh.requests()
               if r["method"] == "PATCH" and "/issues/comments/" in r["path"]]
    assert len(patches) >= 2, "the progress comment was not edited in place"
    reactions = rig.state()["reactions"]
    assert any(r["content"] == "eyes" and r["kind"] == "issue" and r["target"] == 1
               for r in reactions), reactions
    assert rig.boxes_left(1) == []
    if github == "ghes":
        api = [r for r in rig.gh.requests() if not r["path"].startswith("/octo/")]
        assert api and all(r["full_path"].startswith("/api/v3/") for r in api), \
            [r["full_path"] for r in api if not r["full_path"].startswith("/api/v3/")]
        gits = [r for r in rig.gh.requests() if r["path"].startswith("/octo/calc.git/")]
        assert any("git-receive-pack" in r["path"] for r in gits), "no push to the web host"
        assert all(r["full_path"] == r["path"] for r in gits)
        assert pr["html_url"].startswith(rig.gh.web_url + "/octo/calc/pull/")
    assert "autopatch: failed" not in rig.state()["issues"]["1"]["labels"]


def test_sigkill_while_builder_runs_then_restart(rig_factory):
    rig = rig_factory(script=slow_builder_script(30))
    assert rig.label() == 202
    wait_builder_started(rig)
    rig.wait(lambda: rig.job_boxes(1), 60, "the job's sandbox")
    rig.kill_serve(signal.SIGKILL)
    # The next run replays the session from the start.
    rig.model.script = type(rig.model.script)(happy_script())
    rig.start_serve()
    rig.wait(lambda: rig.job_done(1), 300, "the re-run to finish")
    jobs = rig.jobs()
    assert jobs[0]["state"] in ("succeeded", "failed"), jobs
    assert len(rig.pulls()) <= 1
    if jobs[0]["state"] == "succeeded":
        assert len(rig.pulls()) == 1
    assert len(progress_comments(rig)) == 1, "a re-run must edit the same comment"
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


@pytest.mark.parametrize("how", ["unlabel", "stop comment"])
def test_label_removed_or_stop_mid_run_cancels(rig_factory, how):
    rig = rig_factory(script=slow_builder_script(15))
    assert rig.label() == 202
    wait_builder_started(rig)
    t0 = time.time()
    if how == "unlabel":
        assert rig.unlabel() == 200
    else:
        assert rig.comment(1, "/autopatch stop") == 200
    rig.wait(lambda: rig.job_done(1), 120, "the cancel")
    # The job stops at its next step: after the running command, never after the session.
    assert time.time() - t0 < 45, "the job did not stop at its next step"
    builder_calls = [r for r in rig.model.requests() if r["role"] == "builder"]
    assert len(builder_calls) <= 2, "the Builder went on after the cancel"
    assert rig.jobs()[0]["state"] == "cancelled"
    assert rig.pulls() == []
    prog = progress_comments(rig)
    assert len(prog) == 1
    assert "cancelled" in prog[0]["body"] and "No pull request was opened" in prog[0]["body"]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_publish_survives_5xx_and_secondary_rate_limit(rig_factory):
    rig = rig_factory()
    rig.gh.fail(r"^/repos/octo/calc/pulls$", status=502, times=1, method="POST")
    rig.gh.fail(r"^/repos/octo/calc/pulls$", status=403, times=1, method="POST", retry_after=1,
                message="You have exceeded a secondary rate limit. Please wait a few minutes "
                        "before you try again.")
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    assert rig.jobs()[0]["state"] == "succeeded", rig.jobs()
    assert len(rig.pulls()) == 1
    posts = [r for r in rig.gh.requests()
             if r["method"] == "POST" and r["path"] == f"/repos/{REPO}/pulls"]
    assert len(posts) >= 3, "the failures were not retried"


@pytest.mark.parametrize("via", ["/autopatch comment", "review comment"])
def test_feedback_on_the_pr_pushes_a_second_commit(rig_factory, via):
    rig = rig_factory()
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the first job")
    planner, builder = iteration_steps()
    rig.model.script = type(rig.model.script)({"planner": planner, "builder": builder})
    pr = rig.pulls()[0]
    first = rig.branch_log(BRANCH)
    assert len(first) == 1
    if via == "review comment":
        assert rig.review_comment(pr["number"], "make it raise ValueError instead") == 202
    else:
        cid = human_comment(rig, pr["number"], "/autopatch make it raise ValueError instead")
        assert rig.comment(pr["number"], "/autopatch make it raise ValueError instead",
                           on_pr=True, comment_id=cid) == 202
    rig.wait(lambda: rig.job_done(2), 300, "the iteration job")
    jobs = rig.jobs()
    assert all(j["state"] == "succeeded" for j in jobs), [
        (j["state"], j.get("result"), j.get("error")) for j in jobs]
    log = rig.branch_log(BRANCH)
    assert len(log) == 2 and log[1] == first[0], log
    files = rig.branch_files(BRANCH)
    assert "raise ValueError" in files["calc.py"]
    assert "pytest.raises(ValueError)" in files["tests/test_mean_empty.py"]
    assert len(rig.pulls()) == 1
    # The Builder was told what the reviewer asked.
    builder_reqs = [r for r in rig.model.requests() if r["role"] == "builder"]
    assert any("raise ValueError instead" in str(r["body"]["messages"]) for r in builder_reqs)
    # ... and what the earlier run did (its PR body), so it builds on it.
    assert any("What the earlier attempt did" in str(r["body"]["messages"]) and
               "mean() now returns 0.0 for an empty list" in str(r["body"]["messages"])
               for r in builder_reqs)
    # The Tester proved the new patch again before it was pushed.
    verdicts = [m for m in job_events(rig, 2) if m.startswith("tester: ")]
    assert verdicts and "proven" in verdicts[-1], verdicts
    if via == "/autopatch comment":
        assert any(r["content"] == "eyes" and r["kind"] == "comment" and r["target"] == cid
                   for r in rig.state()["reactions"]), rig.state()["reactions"]
    on_pr = rig.bot_comments(pr["number"])
    # The reply's first line is its marker (a retry finds it by that), then what it says.
    replies = [c for c in on_pr if c["body"].startswith("<!-- autopatch:reply (job 2) -->\n"
                                                        "**autopatch** pushed a new commit")]
    assert len(replies) == 1, on_pr
    progress = [c for c in on_pr if MARKER in c["body"]]
    assert len(progress) == 1 and "pushed a proven update" in progress[0]["body"]


def test_no_secret_leaks_anywhere(rig_factory):
    leaked = "ghp_" + "Zq8" * 12  # a GitHub token the model is scripted to print
    script = happy_script()
    script["planner"][-1]["text"] += f"\nWhile reading I saw the token {leaked} in a log."
    finish = script["builder"][-2]["tool_calls"][0]["arguments"]
    finish["summary"] += f" (debug token {leaked})"
    rig = rig_factory(script=script)
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    rig.kill_serve(signal.SIGTERM)
    canaries = rig.canaries() + [leaked]
    assert any(c.startswith("ghs_") for c in canaries), "no installation token was issued"

    places = {"log": rig.log_text()}
    st = rig.state()
    for c in st["comments"]:
        places[f"comment {c['id']}"] = c["body"]
    for p in st["pulls"]:
        places[f"PR {p['number']} body"] = p["body"] or ""
        places[f"PR {p['number']} title"] = p["title"]
        for path, text in rig.branch_files(p["head"]["ref"]).items():
            places[f"pushed {path}"] = text
    for traj in pathlib.Path(rig.tmp / "data" / "trajectories").glob("*.jsonl"):
        places[f"trajectory {traj.name}"] = traj.read_text()
    assert any(k.startswith("trajectory") for k in places), "no trajectory was written"
    assert len(st["pulls"]) == 1
    for where, text in places.items():
        for secret in canaries:
            assert secret not in text, f"a secret leaked into {where}"
    # The model did say it, and it was masked rather than dropped silently.
    assert "***" in st["pulls"][0]["body"]


def test_serve_with_workers_refuses_to_start_without_the_app(autopatch_bin, tmp_path, port):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOPATCH_", "APP_ID", "PRIVATE_KEY", "GITHUB_"))}
    env.update(AUTOPATCH_ENV_FILE="/dev/null", WEBHOOK_SECRET="x" * 16, PORT=str(port),
               AUTOPATCH_BIND="127.0.0.1", AUTOPATCH_DB=str(tmp_path / "a.db"),
               AUTOPATCH_WORKERS="1")
    out = subprocess.run([str(autopatch_bin), "serve"], env=env,
                                       capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    assert "APP_ID" in out.stderr


def test_invalid_repo_config_fails_with_the_line_quoted(rig_factory):
    rig = rig_factory(files={".github/autopatch.yml": "test: python3 -m pytest -q\n"
                                                      "max_iteration: 3\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 120, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed"
    assert rig.pulls() == []
    assert rig.model.requests() == [], "the model must not be called with a broken config"
    prog = progress_comments(rig)
    assert len(prog) == 1
    text = prog[0]["body"]
    assert "could not fix this issue" in text
    assert "line 2: `max_iteration: 3`: unknown key" in text
    assert "trajectories/job-1.jsonl" in text  # where the operator looks
    traj = (rig.tmp / "data" / "trajectories" / "job-1.jsonl").read_text()
    assert "max_iteration" in traj and "pipeline_failure" in traj
    assert "autopatch: failed" in rig.state()["issues"]["1"]["labels"]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_patch_outside_the_allowed_paths_is_not_pushed(rig_factory):
    # An explicit image makes the job create its own box (besides the warm one it took). The
    # Tester's policy hook refuses the diff before testing it; one round, so that ends the job.
    rig = rig_factory(files={".github/autopatch.yml": "image: autopatch-sandbox:latest\n"
                                                      "max_iterations: 1\n"
                                                      "paths:\n  allow: [\"tests/**\"]\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed"
    assert rig.pulls() == []
    assert rig.gh.state_dump()["pushes"] == [], "nothing may be pushed"
    text = progress_comments(rig)[0]["body"]
    assert ("the patch changes `calc.py`: `calc.py` matches no paths.allow glob in "
            ".github/autopatch.yml") in text, text
    assert "autopatch: failed" in rig.state()["issues"]["1"]["labels"]
    assert len(rig.job_boxes(1)) == 2, "the configured image did not get its own box"
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_iteration_reads_its_config_from_the_default_branch(rig_factory):
    # The PR branch is autopatch's own work: a config there (here one no run would accept)
    # must not decide how the next patch is proven.
    rig = rig_factory(files={".github/autopatch.yml": "test: python3 -m pytest -q\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the first job")
    assert rig.jobs()[0]["state"] == "succeeded"
    commit_to_branch(rig, BRANCH, {".github/autopatch.yml": "test: 'true'\nnetwork_x: [evil]\n"})
    planner, builder = iteration_steps()
    rig.model.script = type(rig.model.script)({"planner": planner, "builder": builder})
    pr = rig.pulls()[0]
    assert rig.comment(pr["number"], "/autopatch make it raise ValueError instead",
                       on_pr=True) == 202
    rig.wait(lambda: rig.job_done(2), 300, "the iteration job")
    job = [j for j in rig.jobs() if j["id"] == 2][0]
    assert job["state"] == "succeeded", (job, job_events(rig, 2))
    assert "configuration read from the default branch" in job_events(rig, 2)
    assert "raise ValueError" in rig.branch_files(BRANCH)["calc.py"]
    assert not list((rig.tmp / "data").glob("config-job-*")), "the config checkout was left"


def test_rate_limit_past_the_call_deadline_waits_instead_of_failing(rig_factory):
    # GitHub asks for 5 s; one REST call may wait only 2 s in all, so it gives up with a rate
    # limit error. The job must wait that out and publish, not fail with the branch pushed.
    rig = rig_factory(env={"AUTOPATCH_GH_DEADLINE_S": "2"})
    rig.gh.fail(r"^/repos/octo/calc/pulls$", status=403, times=1, method="POST", retry_after=5,
                message="You have exceeded a secondary rate limit. Please wait a few minutes "
                        "before you try again.")
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    job = rig.jobs()[0]
    assert job["state"] == "succeeded", (job, job_events(rig, 1))
    assert len(rig.pulls()) == 1
    posts = [r["time"] for r in rig.gh.requests()
             if r["method"] == "POST" and r["path"] == f"/repos/{REPO}/pulls"]
    assert len(posts) == 2 and posts[1] - posts[0] >= 4.5, posts
    waits = [int(m.group(1)) for m in (re.search(r"GitHub rate limit: waiting (\d+) s", e)
                                       for e in job_events(rig, 1)) if m]
    assert len(waits) == 1 and 4 <= waits[0] <= 7, (waits, job_events(rig, 1))
    assert "autopatch: failed" not in rig.state()["issues"]["1"]["labels"]


def test_stop_while_queued_for_a_retry_edits_the_comment(rig_factory):
    # Attempt 1 loses GitHub (the connection drops) after the comment exists: the job waits
    # two minutes for its retry, and the comment says autopatch will retry.
    rig = rig_factory(env={"AUTOPATCH_RETRY_SECONDS": "120", "AUTOPATCH_GH_RETRIES": "1"})
    rig.gh.fail(r"^/repos/octo/calc$", method="GET", drop=True, times=50)
    assert rig.label() == 202
    rig.wait(lambda: "will retry" in "".join(c["body"] for c in progress_comments(rig)), 120,
             "the comment to say autopatch will retry")
    assert rig.jobs()[0]["state"] == "queued"
    assert rig.comment(1, "/autopatch stop") == 200
    rig.wait(lambda: rig.job_done(1), 30, "the cancel")
    assert rig.jobs()[0]["state"] == "cancelled"
    rig.wait(lambda: "cancelled" in progress_comments(rig)[0]["body"], 30,
             "the comment to say cancelled")
    prog = progress_comments(rig)
    assert len(prog) == 1
    assert "No pull request was opened" in prog[0]["body"]
    assert "will retry" not in prog[0]["body"]
    assert rig.pulls() == []


def test_tester_never_proves_a_patch(rig_factory):
    # The Builder's "reproduction" test already passes on the pristine code: the Tester must
    # refuse it, and with one round allowed the job fails without pushing anything.
    script = happy_script()
    script["builder"] = [
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "tests/test_mean_one.py",
            "content": "import calc\n\n\ndef test_mean_of_one():\n"
                       "    assert calc.mean([2.0]) == 2.0\n"}}]},
        {"tool_calls": [{"name": "finish", "arguments": {
            "test_path": "tests/test_mean_one.py",
            "test_command": "python3 -m pytest -q tests/test_mean_one.py",
            "summary": "Added a test."}}]},
        {"text": "Done."},
    ]
    rig = rig_factory(script=script, files={
        ".github/autopatch.yml": "test: python3 -m pytest -q\nmax_iterations: 1\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed"
    assert rig.pulls() == []
    assert rig.gh.state_dump()["pushes"] == [], "nothing may be pushed"
    prog = progress_comments(rig)
    assert len(prog) == 1
    text = prog[0]["body"]
    assert "could not fix this issue" in text
    assert "rejected" in text  # why: the Tester's verdict
    assert "**What was tried:** 1 Builder/Tester round" in text, text
    assert "trajectories/job-1.jsonl" in text
    traj = (rig.tmp / "data" / "trajectories" / "job-1.jsonl").read_text()
    assert "rejected" in traj or "proven\": false" in traj
    assert "autopatch: failed" in rig.state()["issues"]["1"]["labels"]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_setup_and_network_keys_reach_the_sandbox(rig_factory):
    # setup runs in the job's box before the Planner; network gives that box an egress
    # allow-list (a proxy named in HTTPS_PROXY, no direct route). The setup command reports
    # what it sees through its exit status: 0 = proxy configured and direct access blocked;
    # any other status stops the job (docs/environments.md), with the status in the comment.
    config = ("test: python3 -m pytest -q\n"
              "setup: |\n"
              "  python3 - <<'EOF'\n"
              "  import os, socket, sys\n"
              "  p = os.environ.get('HTTPS_PROXY', '')\n"
              "  try:\n"
              "      socket.create_connection(('1.1.1.1', 80), 2)\n"
              "      direct = True\n"
              "  except OSError:\n"
              "      direct = False\n"
              "  sys.exit(0 if p.startswith('http://') and not direct else 7)\n"
              "  EOF\n"
              "network: [\"mirror.invalid:443\"]\n")
    rig = rig_factory(files={".github/autopatch.yml": config})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    events = job_events(rig, 1)
    assert rig.jobs()[0]["state"] == "succeeded", events
    assert any(m.startswith("setup ran (") for m in events), events
    assert "network off: the egress allow-list ended with setup" in events, events
    assert any(m.startswith("sandbox ") and "egress allow-list" in m for m in events), events
    assert len(rig.pulls()) == 1
    assert "`test` from .github/autopatch.yml" in rig.pulls()[0]["body"]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter",
                           f"label=autopatch.owner={rig.owner}", "--filter",
                           "label=autopatch.job=job-1"], capture_output=True, text=True)
    assert nets.stdout.split() == [], "the job's egress network was left behind"


def test_patch_to_the_autopatch_config_is_never_pushed(rig_factory):
    # A proven patch that also rewrites .github/autopatch.yml (here: a weaker `test:`) would
    # set the rules for the next run on this branch; it is refused whatever paths allow.
    script = happy_script()
    script["builder"].insert(0, {"tool_calls": [{"name": "write_file", "arguments": {
        "path": ".github/autopatch.yml", "content": "test: 'true'\n"}}]})
    rig = rig_factory(script=script, files={
        ".github/autopatch.yml": "test: python3 -m pytest -q\nmax_iterations: 1\n"
                                 "paths:\n  allow: [\"**\"]\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed", job_events(rig, 1)
    assert rig.pulls() == []
    assert rig.gh.state_dump()["pushes"] == [], "nothing may be pushed"
    text = progress_comments(rig)[0]["body"]
    assert "`.github/autopatch.yml`" in text and "configuration" in text, text
    assert "autopatch: failed" in rig.state()["issues"]["1"]["labels"]


def test_rate_limit_while_preparing_waits_instead_of_spending_the_job(rig_factory):
    # One attempt allowed: a rate limit on reading the issue must be waited out, not turned
    # into a failed job (or a re-queue per retry that fails on a reset far away).
    rig = rig_factory(env={"AUTOPATCH_GH_DEADLINE_S": "2", "AUTOPATCH_MAX_ATTEMPTS": "1"})
    rig.gh.fail(r"^/repos/octo/calc/issues/1$", status=403, times=1, method="GET",
                retry_after=4, message="You have exceeded a secondary rate limit.")
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    job = rig.jobs()[0]
    assert job["state"] == "succeeded", (job, job_events(rig, 1))
    assert job["attempts"] == 1
    assert len(rig.pulls()) == 1
    assert any("GitHub rate limit: waiting" in m for m in job_events(rig, 1))
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


# ---- what the Tester decided, as `serve` shows it (issue 10) ----

def test_environment_failure_stops_the_job_before_any_model_call(rig_factory):
    # The toolchain is there but the suite cannot run on the unchanged code: the baseline
    # says so, quoting the first errors and what to change.
    files = {"tests/test_m%d.py" % i: "import module_that_setup_never_installed\n"
             for i in range(3)}
    files[".github/autopatch.yml"] = "test: python3 -m pytest -q tests\n"
    rig = rig_factory(files=files)
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed", job_events(rig, 1)
    assert rig.model.requests() == [], "no model call for an environment problem"
    assert rig.pulls() == []
    text = [c for c in rig.bot_comments(1) if MARKER in c["body"]][0]["body"]
    assert "environment failure" in text, text
    assert "collection or import errors" in text, text
    assert "No module named 'module_that_setup_never_installed'" in text, text
    assert "`setup:`" in text  # what to change
    events = job_events(rig, 1)
    assert any("baseline" in m for m in events), events
    assert "autopatch: failed" in rig.state()["issues"]["1"]["labels"]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_missing_toolchain_stops_the_job_before_setup_and_any_model_call(rig_factory):
    rig = rig_factory(files={".github/autopatch.yml": "test: npm test\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed", job_events(rig, 1)
    assert rig.model.requests() == [], "no model call for an environment problem"
    text = [c for c in rig.bot_comments(1) if MARKER in c["body"]][0]["body"]
    assert ("environment failure: the test command `npm test` needs `npm`, which the "
            "sandbox image") in text, text
    assert "add `image: node` to .github/autopatch.yml" in text, text
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
