"""`autopatch fix` end to end: scripted models (both wire formats), the real Docker sandbox, the
real Tester, on examples/calc. Every test fails if the behaviour it names breaks."""
import json
import re
import subprocess

import pytest

from agents_util import (GOOD_FIX, ORIGINAL_LINE, PROVIDERS, READ_ONLY_TOOLS, REPRO_CMD,
                         REPRO_PATH, WRITE_OR_RUN_TOOLS, call, finish, happy, replace, run_fix,
                         step, tool_names, tool_results, write_repro)


@pytest.fixture(params=PROVIDERS)
def provider(request):
    return request.param


def test_happy_path_gives_a_proven_patch(autopatch_bin, tmp_path, provider):
    r = run_fix(autopatch_bin, tmp_path, happy(), provider)
    assert r.code == 0, r
    assert "PROVEN" in r.out, r
    # no settings file: the shared detector chose, and fix says from what
    assert "test command: python3 -m pytest -q (detected: conftest.py)\n" in r.out, r
    assert "settings from" not in r.out
    diff = r.out_path.read_text()
    assert "+    if not values:" in diff and "+        return 0.0" in diff
    assert "b/" + REPRO_PATH in diff
    assert diff in r.out  # the final diff is printed
    # the Tester's evidence: repro fails on pristine with the issue's error, passes after
    assert "ZeroDivisionError" in r.out and "**fails**" in r.out and "**passes**" in r.out
    assert "| pristine | 7 | 0 | 0 | 0 | 0 |" in r.out and "| patched | 7 | 0 | 0 | 0 | 0 |" in r.out
    # the Planner's tools really ran in the box (read-only /repo)
    listing, found = tool_results(r.by_role("planner")[1])
    assert "calc.py" in listing.split() and "tests/test_calc.py" in listing.split()
    assert found.strip() == "calc.py:16:def mean(values):"
    window = tool_results(r.by_role("planner")[2])[-1]
    assert "    18  " + ORIGINAL_LINE.rstrip() in window and "[calc.py: lines 1-40 of" in window
    # one line per step
    for stage in ("[planning] Planner started", "[building] Builder started",
                  "[testing] round 1: proven"):
        assert stage in r.out, r
    # the trajectory records messages, tool calls, verdicts and usage
    assert "trajectory: %s" % r.traj_path in r.out
    events = [json.loads(line) for line in r.traj_path.read_text().splitlines()]
    types = {e["type"] for e in events}
    assert {"start", "llm_request", "llm_response", "tool_result", "tester_run", "verdict",
            "end"} <= types
    usage = [e for e in events if e["type"] == "llm_usage"]
    assert len(usage) == 8 and all(u["tokens_in"] > 0 and u["tokens_out"] > 0 for u in usage)
    assert sum(u["tokens_in"] for u in usage) == [e for e in events if e["type"] == "end"][0]["tokens_in"]
    end = [e for e in events if e["type"] == "end"][0]
    assert end["proven"] is True and end["model_calls"] == len(r.requests) == 8
    assert end["tokens_in"] > 0 and end["tokens_out"] > 0
    # provider wire details
    req = r.requests[0]
    if provider == "anthropic":
        assert req["path"] == "/v1/messages" and req["headers"]["anthropic-version"]
        assert "system" in req["body"]
    else:
        assert req["path"] == "/v1/chat/completions"
        assert req["body"]["messages"][0]["role"] == "system"


def test_planner_is_never_offered_a_writing_or_running_tool(autopatch_bin, tmp_path, provider):
    r = run_fix(autopatch_bin, tmp_path, happy(), provider)
    assert r.code == 0, r
    planner = r.by_role("planner")
    builder = r.by_role("builder")
    assert len(planner) == 3 and len(builder) == 5
    for req in planner:
        offered = set(tool_names(req))
        assert offered == READ_ONLY_TOOLS, offered
        assert not offered & WRITE_OR_RUN_TOOLS
    for req in builder:
        assert WRITE_OR_RUN_TOOLS | READ_ONLY_TOOLS == set(tool_names(req))


def test_planner_calling_a_write_tool_is_refused(autopatch_bin, tmp_path, provider):
    s = happy()
    s["planner"].insert(0, step(call("write_file", path="calc.py", content="oops"),
                                call("run", command="touch /tmp/workspace/pwned")))
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    assert r.code == 0, r
    results = tool_results(r.by_role("planner")[1])
    assert any("unknown tool 'write_file'" in t for t in results), results
    assert any("unknown tool 'run'" in t for t in results), results
    assert "pwned" not in r.out_path.read_text()
    assert "oops" not in r.out_path.read_text()


def test_wrong_first_fix_is_caught_and_builder_sees_tester_output(autopatch_bin, tmp_path,
                                                                    provider):
    wrong = "    if not values:\n        return None\n" + ORIGINAL_LINE
    s = happy()
    s["builder"] = [
        step(write_repro()),
        step(replace(ORIGINAL_LINE, wrong)),
        step(finish()),
        # round 2: correct it
        step(replace("        return None\n", "        return 0.0\n")),
        step(finish()),
    ]
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    assert r.code == 0, r
    assert "round 1: rejected - the reproduction test FAILS on the patched code" in r.out, r
    assert "round 2: proven" in r.out
    after_reject = r.by_role("builder")[3]
    last = tool_results(after_reject)[-1]
    assert "Tester: REJECTED" in last
    assert "assert None == 0.0" in last  # the Tester's failure output, head and tail
    assert REPRO_CMD in last
    assert "+        return 0.0" in r.out_path.read_text()


def test_repro_that_passes_on_pristine_is_rejected_and_model_told_why(autopatch_bin, tmp_path,
                                                                      provider):
    passing = "import calc\n\n\ndef test_mean_of_empty_list_is_zero():\n    assert calc.mean([2, 4]) == 3\n"
    s = happy()
    s["builder"] = [
        step(write_repro(passing)),
        step(GOOD_FIX),
        step(finish()),
        step(write_repro()),  # round 2: a test that really reproduces the bug
        step(finish()),
    ]
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    assert r.code == 0, r
    assert "round 1: rejected - the reproduction test PASSED on the pristine code" in r.out, r
    last = tool_results(r.by_role("builder")[3])[-1]
    assert "PASSED on the pristine code" in last and "must fail before the fix" in last
    assert "round 2: proven" in r.out


def test_fix_that_breaks_an_existing_test_is_rejected(autopatch_bin, tmp_path, provider):
    breaking = "    if not values:\n        return 0.0\n    return total(values) // len(values)\n"
    s = happy()
    s["builder"] = [step(write_repro()), step(replace(ORIGINAL_LINE, breaking)), step(finish())]
    r = run_fix(autopatch_bin, tmp_path, s, provider, args=["--max-iterations", "1"])
    assert r.code == 1, r
    assert "NOT PROVEN" in r.out and "\nPROVEN:" not in r.out
    assert "the patch breaks 1 test that passed before" in r.out
    assert "`tests.test_calc::test_mean`: failed: assert 2 == 2.5" in r.out
    assert not r.out_path.exists()


def test_never_finishing_model_stops_at_the_budget(autopatch_bin, tmp_path, provider):
    s = happy()
    s["builder"] = [step(call("run", command="echo still working {n}"), repeat=True)]
    r = run_fix(autopatch_bin, tmp_path, s, provider, env={"AUTOPATCH_MAX_MODEL_CALLS": "7"})
    assert r.code == 1, r
    assert "model-call budget exhausted during building" in r.out, r
    assert "7 of 7 model calls" in r.out
    assert len(r.requests) == 7


def test_repeated_identical_call_gets_a_nudge_then_a_stop(autopatch_bin, tmp_path, provider):
    s = happy()
    s["builder"] = [step(call("read_file", path="calc.py"), repeat=True)]
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    assert r.code == 1, r
    builder = r.by_role("builder")
    assert len(builder) == 4  # three answered (the third with a nudge), the fourth stops
    nudge = tool_results(builder[3])[-1]
    assert "You have made this exact read_file call 3 times" in nudge
    assert "repeated-call budget exhausted" in r.out


def test_malformed_tool_arguments_get_an_error_and_the_job_continues(autopatch_bin, tmp_path,
                                                                     provider):
    s = happy()
    s["builder"][0:0] = [
        step({"name": "read_file", "arguments": "{not json"}),
        step(call("read_file", path=42)),
        step(call("replace_in_file", path="calc.py", old="no such text", new="x")),
        step(call("read_file", path="calc.py", colour="blue")),
    ]
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    assert r.code == 0, r
    b = r.by_role("builder")
    first = tool_results(b[1])[-1]
    assert ("arguments must be a JSON object" in first or "unknown argument '_malformed'" in first)
    assert "argument 'path' must be a string" in tool_results(b[2])[-1]
    assert "was not found in calc.py" in tool_results(b[3])[-1]
    assert "unknown argument 'colour'" in tool_results(b[4])[-1]
    if provider == "anthropic":  # errors are flagged as such in the wire format
        blocks = [blk for m in b[2]["body"]["messages"] if isinstance(m["content"], list)
                  for blk in m["content"] if blk.get("type") == "tool_result"]
        assert blocks[-1].get("is_error") is True
    assert "PROVEN" in r.out


def test_rate_limited_call_is_retried_after_retry_after(autopatch_bin, tmp_path, provider):
    s = happy()
    status = 429 if provider == "openai" else 529
    s["planner"].insert(0, {"status": status, "retry_after": 1})
    s["builder"].insert(2, {"status": 503})
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    assert r.code == 0, r
    planner = r.by_role("planner")
    assert planner[0]["status"] == status and planner[1]["status"] == 200
    assert planner[0]["body"] == planner[1]["body"]  # the same request, retried
    assert planner[1]["time"] - planner[0]["time"] >= 0.9  # honoured retry-after: 1
    assert [q["status"] for q in r.by_role("builder")].count(503) == 1
    assert "PROVEN" in r.out


def test_model_writes_cannot_touch_paths_outside_the_workspace(autopatch_bin, tmp_path,
                                                               provider):
    s = happy()
    s["builder"][0:0] = [
        step(call("write_file", path="../escape.txt", content="x")),
        step(call("write_file", path="/tmp/abs.txt", content="x")),
        step(call("run", command="ln -s /tmp link && ln -s /etc etclink")),
        step(call("write_file", path="link/evil.txt", content="x")),
        step(call("replace_in_file", path="etclink/hostname", old="a", new="b")),
        step(call("read_file", path="etclink/passwd")),
        step(call("finish", test_path="link/evil.txt", test_command="true evil.txt", summary="s")),
        step(call("run", command="ls /tmp/escape.txt /tmp/workspace/../escape.txt /tmp/abs.txt "
                                 "/tmp/evil.txt 2>&1; rm link etclink; echo checked")),
    ]
    r = run_fix(autopatch_bin, tmp_path, s, provider)
    b = r.by_role("builder")
    res = [tool_results(b[i])[-1] for i in range(1, 9)]
    assert "'..' path components are not allowed" in res[0]
    assert "absolute paths are not allowed" in res[1]
    assert "resolves outside the workspace" in res[3]
    assert "resolves outside the workspace" in res[4]
    assert "resolves outside the workspace" in res[5]
    assert "resolves outside the workspace" in res[6]
    listing = res[7]
    assert "checked" in listing and listing.count("No such file") == 4, listing
    assert r.code == 0, r  # the job went on to a proven fix
    diff = r.out_path.read_text()
    assert "link" not in diff and "evil" not in diff


@pytest.mark.parametrize("kind", ["token", "wall-time"])
def test_token_and_wall_time_budgets_stop_the_job(autopatch_bin, tmp_path, kind):
    s = happy()
    s["builder"] = [step(call("run", command="sleep 3; echo {n}"), usage={"in": 400, "out": 50},
                         repeat=True)]
    for st in s["planner"]:
        st["usage"] = {"in": 100, "out": 10}  # planning stays far below the limit
    env = ({"AUTOPATCH_MAX_TOKENS": "2000"} if kind == "token"
           else {"AUTOPATCH_MAX_WALL_SECONDS": "10"})
    r = run_fix(autopatch_bin, tmp_path, s, "openai", env=env)
    assert r.code == 1, r
    assert "stopped: %s budget exhausted during building" % kind in r.out, r
    if kind == "token":
        assert "of 2000 tokens" in r.out
        assert len(r.by_role("builder")) < 5
    else:
        assert "of 10 s" in r.out
    end = [json.loads(x) for x in r.traj_path.read_text().splitlines()][-1]
    assert end["type"] == "end" and end["proven"] is False and kind in end["failure"]


def test_huge_unrelated_diff_is_rejected(autopatch_bin, tmp_path):
    junk = "".join("note %d\n" % i for i in range(600))
    s = happy()
    s["builder"] = [
        step(write_repro()),
        step(GOOD_FIX, call("write_file", path="notes/scratch.txt", content=junk)),
        step(finish()),
        step(call("run", command="rm -r notes")),  # round 2: drop the unrelated file
        step(finish()),
    ]
    r = run_fix(autopatch_bin, tmp_path, s, "openai")
    assert r.code == 0, r
    assert re.search(r"round 1: rejected - the diff adds or removes 6\d\d lines \(limit 500\)",
                     r.out), r
    assert "notes/scratch.txt" in tool_results(r.by_role("builder")[3])[-1]
    assert "round 2: proven" in r.out
    assert "scratch" not in r.out_path.read_text()


def test_junit_reports_are_compared_per_test_and_cleaned_up(autopatch_bin, tmp_path):
    makefile = "test:\n\tpython3 -m pytest -q -p no:cacheprovider --junitxml=build/junit-report.xml\n"
    breaking = "    if not values:\n        return 0.0\n    return total(values) // len(values)\n"
    s = happy()
    s["builder"] = [
        step(write_repro()),
        step(replace(ORIGINAL_LINE, breaking)),
        step(finish()),
        step(replace("    return total(values) // len(values)\n", ORIGINAL_LINE)),
        step(finish()),
    ]
    r = run_fix(autopatch_bin, tmp_path, s, "openai", args=["--test", "make test"],
                extra_files={"Makefile": makefile})
    assert r.code == 0, r
    assert "test command: make test (from --test)\n" in r.out, r
    # JUnit test ids (classname::name), not pytest's node ids: the reports were used
    assert "`tests.test_calc::test_mean`: failed" in tool_results(r.by_role("builder")[3])[-1]
    assert "round 2: proven" in r.out
    assert "| pristine | 7 | 0 | 0 | 0 | 0 |" in r.out and "| patched | 7 | 0 | 0 | 0 | 0 |" in r.out
    diff = r.out_path.read_text()
    assert "junit-report" not in diff and "build/" not in diff  # the Tester cleaned up


def test_model_server_that_keeps_failing_ends_the_job_with_the_reason(autopatch_bin, tmp_path,
                                                                      provider):
    s = {"planner": [{"status": 500}, {"status": 502}, {"status": 503}]}
    r = run_fix(autopatch_bin, tmp_path, s, provider, env={"AUTOPATCH_LLM_RETRIES": "2"})
    assert r.code == 1, r
    assert [q["status"] for q in r.requests] == [500, 502, 503]
    assert "model call failed during planning: model server answered HTTP 503 after 3 attempt(s)" in r.out, r


def test_planner_that_never_plans_is_nudged_then_stopped(autopatch_bin, tmp_path):
    s = {"planner": [step(call("list_files", path="tests", max_depth="{n}"), repeat=True)]}
    r = run_fix(autopatch_bin, tmp_path, s, "openai")
    assert r.code == 1, r
    planner = r.by_role("planner")
    assert len(planner) == 16
    assert all("reply now" not in json.dumps(q["body"]["messages"]) for q in planner[:13])
    last_user = planner[13]["body"]["messages"][-1]
    assert last_user["role"] == "user" and "reply now with the plan" in last_user["content"]
    assert "stopped: planner rounds" in r.out


def test_fix_usage_errors_exit_2_with_a_sentence(autopatch_bin, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "README").write_text("no tests here\n")
    subprocess.run(["git", "-C", str(plain), "init", "-q"], check=True)
    issue = tmp_path / "issue.md"
    issue.write_text("title\nbody\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cases = [
        ([], "usage: autopatch fix"),
        (["--repo", str(plain)], "usage: autopatch fix"),
        (["--repo", str(plain), "--issue", "x", "--issue-file", str(issue)], "usage"),
        (["--repo", str(tmp_path / "missing"), "--issue", "x"], "is not a directory"),
        (["--repo", str(plain), "--issue", "x", "--max-iterations", "0"], "--max-iterations"),
        (["--repo", str(plain), "--issue-file", str(issue)], "pass --test CMD"),
    ]
    nogit = tmp_path / "nogit"
    nogit.mkdir()
    cases.append((["--repo", str(nogit), "--issue", "x"], "is not a git repository"))
    for args, message in cases:
        p = subprocess.run([str(autopatch_bin), "fix"] + args, cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert message in p.stderr, (args, p.stderr)
