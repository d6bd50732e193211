"""End to end: a POST that GitHub applied but answered with a 502 (or whose connection was cut
after it was applied) is not blindly repeated: the job looks the object up first, so it ends
with exactly one progress comment, one pull request and, for an iteration, one reply.

The stand-in applies the request and then loses its answer (`fail(..., after=True)`).
"""
import pytest

from pipeline_util import REPO
from test_pipeline import BRANCH, MARKER, iteration_steps
from test_pipeline import rig_factory  # noqa: F401 - the fixture, shared




def posts(rig, path):
    return [r for r in rig.gh.requests() if r["method"] == "POST" and r["path"] == path]


def progress_comments(rig, number=1):
    return [c for c in rig.bot_comments(number) if c["body"].startswith(MARKER)]


@pytest.mark.parametrize("target,how", [("comment", "502"), ("pull", "502"), ("pull", "cut")])
def test_applied_post_with_lost_answer_is_not_duplicated(rig_factory, target, how):
    rig = rig_factory()
    path = f"/repos/{REPO}/issues/1/comments" if target == "comment" else f"/repos/{REPO}/pulls"
    rig.gh.fail("^" + path + "$", method="POST", status=502, times=1, after=True,
                drop=how == "cut")
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    jobs = rig.jobs()
    assert jobs[0]["state"] == "succeeded", jobs
    assert len(rig.pulls()) == 1, rig.pulls()
    prog = progress_comments(rig)
    assert len(prog) == 1, rig.bot_comments(1)
    assert "opened a pull request" in prog[0]["body"]
    assert rig.pulls()[0]["html_url"] in prog[0]["body"]
    # The failed POST was applied, then found: never sent a second time.
    assert len(posts(rig, path)) == 1, posts(rig, path)
    if target == "pull":
        lookups = [r for r in rig.gh.requests() if r["method"] == "GET"
                   and r["path"] == f"/repos/{REPO}/pulls" and "head=" in r["query"]]
        assert len(lookups) >= 2, "the PR was not looked up after the lost answer"
        assert "Fixes #1" in rig.pulls()[0]["body"]


def test_iteration_reply_and_progress_comment_not_duplicated(rig_factory):
    rig = rig_factory()
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the first job")
    pr = rig.pulls()[0]
    planner, builder = iteration_steps()
    rig.model.script = type(rig.model.script)({"planner": planner, "builder": builder})
    # Both comments the iteration creates on the PR (its progress comment, then the reply)
    # are applied and answered with a 502.
    path = f"/repos/{REPO}/issues/{pr['number']}/comments"
    rig.gh.fail("^" + path + "$", method="POST", status=502, times=2, after=True)
    assert rig.comment(pr["number"], "/autopatch make it raise ValueError instead",
                       on_pr=True) == 202
    rig.wait(lambda: rig.job_done(2), 300, "the iteration job")
    job = [j for j in rig.jobs() if j["id"] == 2][0]
    assert job["state"] == "succeeded", job
    assert len(rig.branch_log(BRANCH)) == 2
    on_pr = rig.bot_comments(pr["number"])
    replies = [c for c in on_pr if c["body"].startswith("<!-- autopatch:reply (job 2) -->\n")]
    assert len(replies) == 1, on_pr
    assert "**autopatch** pushed a new commit" in replies[0]["body"]
    assert len(progress_comments(rig, pr["number"])) == 1, on_pr
    assert len(on_pr) == 2, on_pr
    assert len(posts(rig, path)) == 2, posts(rig, path)
    assert len(rig.pulls()) == 1
