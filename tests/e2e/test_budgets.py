"""End to end: costs and daily budgets (docs/agents.md "Costs and budgets").

A priced model, a tiny daily budget: the first job runs and its cost is recorded (jobs --json,
the table, the PR footer); the second is refused before any model call, says so in its
progress comment, and the model stand-in sees no request for it. A provider that reports no
usage is charged the most each call could have used (the request's bytes as input tokens, its
max_tokens as output), never nothing, and that spending refuses the next job too.

Real `autopatch serve`, SQLite, Docker; GitHub and the model are the stand-ins.
"""
import json
import re
import subprocess

import pytest

from pipeline_util import Rig

MARKER = "<!-- autopatch:progress -->"
MODEL = "scripted-calc"  # the Rig's AUTOPATCH_LLM_MODEL


@pytest.fixture
def rig_factory(tmp_path, autopatch_bin):
    rigs = []

    def make(env, omit_usage=False):
        rig = Rig(tmp_path / f"rig{len(rigs)}", autopatch_bin, env=env, issues=2,
                  omit_usage=omit_usage)
        rig.tmp.mkdir(parents=True)
        rigs.append(rig)
        return rig.start()

    yield make
    for r in rigs:
        r.stop()


def usd(micro):
    """The product's money format (agents/cost.h cost_format_usd)."""
    frac = "%06d" % (micro % 1000000)
    while len(frac) > 2 and frac.endswith("0"):
        frac = frac[:-1]
    return "$%d.%s" % (micro // 1000000, frac)


def progress(rig, issue):
    return [c["body"] for c in rig.bot_comments(issue) if MARKER in c["body"]]


def run_two_jobs(rig):
    """Job 1 on issue #1 to the end, then job 2 on issue #2 to the end; the jobs by id."""
    assert rig.label(1) == 202
    rig.wait(lambda: rig.job_done(1), 300, "job 1")
    calls_after_first = len(rig.model.requests())
    assert rig.label(2) == 202
    rig.wait(lambda: rig.job_done(2), 120, "job 2")
    assert len(rig.model.requests()) == calls_after_first, \
        "the refused job called the model"
    return {j["id"]: j for j in rig.jobs()}, calls_after_first


def test_a_job_that_could_exceed_the_repository_budget_is_not_started(rig_factory):
    # $1 per million tokens both ways; at most 200000 tokens a job: a job may cost $0.20, the
    # repository may spend $0.20 a day. Job 1 fits exactly; after it, any spending at all
    # leaves less than a whole job's maximum.
    rig = rig_factory({"AUTOPATCH_PRICES": f"other=9/9, {MODEL}=1/1",
                       "AUTOPATCH_MAX_TOKENS": "200000",
                       "AUTOPATCH_REPO_DAILY_BUDGET_USD": "0.20"})
    jobs, ncalls = run_two_jobs(rig)
    first, second = jobs[1], jobs[2]
    assert first["state"] == "succeeded", first
    assert ncalls > 0

    # The recorded cost is exactly what the stand-in reported, priced at $1 per million.
    reqs = rig.model.requests()
    tin = sum(r["usage"]["in"] for r in reqs)
    tout = sum(r["usage"]["out"] for r in reqs)
    assert first["model_calls"] == len(reqs)
    assert (first["tokens_in"], first["tokens_out"]) == (tin, tout)
    assert first["cost_usd"] == pytest.approx((tin + tout) / 1e6, abs=1e-9)
    assert 0 < first["cost_usd"] < 0.2

    # The PR footer shows it.
    [pr] = rig.pulls()
    cost_text = usd(tin + tout)
    assert re.search(r"cost: \$0\.\d+", pr["body"]), pr["body"]
    assert cost_text in pr["body"], (cost_text, pr["body"])

    # Job 2: refused before it started, nothing spent, and its comment says why.
    assert second["state"] == "failed", second
    assert second["model_calls"] == 0 and second["cost_usd"] is None, second
    assert "daily budget of octo/calc" in second["error"], second
    [text] = progress(rig, 2)
    assert "could not fix this issue" in text
    assert "not started: the daily budget of octo/calc ($0.20 per UTC day) could be exceeded" \
        in text, text
    assert "this job may cost up to $0.20" in text
    assert "no model was called" in text
    assert rig.containers("job-2") == [], "a refused job created a sandbox"

    # `autopatch jobs` shows tokens and cost per job.
    out = subprocess.run([rig.bin, "jobs"], env=rig.env(), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert "TOKENS" in header and "COST" in header
    row1 = [r.split() for r in rows if r.split()[0] == "1"][0]
    assert row1[10:12] == [str(tin + tout), cost_text], row1
    row2 = [r.split() for r in rows if r.split()[0] == "2"][0]
    assert row2[10:12] == ["0", "-"], row2


def test_a_provider_without_usage_is_charged_the_most_not_nothing(rig_factory):
    # The default AUTOPATCH_MAX_TOKENS (1000000) at $1 per million: a job may cost $1.00; the
    # global budget is $1.05. Counted as free, job 1 would leave room for job 2.
    rig = rig_factory({"AUTOPATCH_PRICES": "*=1/1",
                       "AUTOPATCH_DAILY_BUDGET_USD": "1.05"}, omit_usage=True)
    jobs, ncalls = run_two_jobs(rig)
    first, second = jobs[1], jobs[2]
    assert first["state"] == "succeeded", first

    reqs = rig.model.requests()
    assert reqs and all(r["usage"] is None for r in reqs), "the stand-in sent usage"
    # Every byte of each request as an input token, each request's max_tokens as output.
    tin = sum(r["bytes"] for r in reqs)
    tout = sum(r["body"]["max_tokens"] for r in reqs)
    assert (first["tokens_in"], first["tokens_out"]) == (tin, tout), first
    assert first["cost_usd"] == pytest.approx((tin + tout) / 1e6, abs=1e-9)
    assert first["cost_usd"] > 0.05

    [pr] = rig.pulls()
    assert "%d calls without reported usage counted at the most" % ncalls in pr["body"]
    traj = (rig.tmp / "data" / "trajectories" / "job-1.jsonl").read_text().splitlines()
    usage = [json.loads(x) for x in traj if '"llm_usage"' in x]
    assert usage and all(u["estimated"] is True for u in usage)

    assert second["state"] == "failed", second
    assert "the daily budget for all repositories ($1.05 per UTC day)" in second["error"]
    [text] = progress(rig, 2)
    assert "not started" in text and "no model was called" in text
