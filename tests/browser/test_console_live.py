"""The console while a demo job runs (the calc example: GitHub and model stand-ins, real
sandbox), in headless Chromium: the list gains the job's row and follows its state without a
reload; the job's page follows the run over one event stream, each event once, across a
forced reconnect (the scenario cuts the connections at a proxy); the stage and state fields
change in place; the finished page leads with the title, the issue link and the outcome with
the PR link, then the evidence table and the diff, with the details folded; "show all" serves
a whole output; the filters live in the URL; the pages read the same with JavaScript off; and
no page has an accessibility problem (lang, one h1, no skipped heading level, labelled
controls, named links and buttons, header scopes, WCAG AA contrast computed in the page).
The screenshots it takes are the ones docs/console.md shows."""
import json
import threading
import time

from pipeline_util import REPO, Rig, happy_script
from server_util import free_port


def _label_when_list_is_open(rig, flag, result):
    for _ in range(600):
        if flag.exists():
            result["status"] = rig.label()
            return
        time.sleep(0.1)


def test_console_follows_a_running_job(autopatch_bin, tmp_path, browser):
    script = happy_script()
    # A slow model: the job is still running when the browser opens it, and each later step
    # arrives as a live event.
    script["planner"][0]["delay_s"] = 6
    for step in script["builder"]:
        step["delay_s"] = 1
    admin = free_port()
    rig = Rig(tmp_path, autopatch_bin, script=script,
              env={"AUTOPATCH_ADMIN_LISTEN": f"127.0.0.1:{admin}"}).start()
    flag, labelled = tmp_path / "list-open", {}
    labeller = threading.Thread(target=_label_when_list_is_open, args=(rig, flag, labelled))
    labeller.start()
    try:
        out = browser("live.mjs", console=f"http://127.0.0.1:{admin}", repo=REPO,
                      dir=str(tmp_path))
        labeller.join()
        assert labelled["status"] == 202
        # 1. The list gained the row live, then changed its state, with no reload.
        assert out["a11yEmptyList"] == [], out["a11yEmptyList"]
        assert out["listRowTitle"].strip() == rig.title
        assert out["listIssueHref"].endswith(f"/{REPO}/issues/1"), out["listIssueHref"]
        assert out["listFirstState"] in ("queued", "running")
        assert out["listLaterState"] == "running"
        assert out["listCountRunning"] == "1" and out["listMatching"] == "1"
        assert out["listStayed"] is True
        assert out["a11yList"] == [], out["a11yList"]
        # 2. The stage field changed in place; the timeline shows each event once, none
        # skipped, across the forced reconnect.
        assert out["liveAttr"] == "1"
        assert out["stageLater"] != out["firstStage"], (out["firstStage"], out["stageLater"])
        assert out["stageStayed"] is True
        assert out["runningState"] == "running"
        # The counters follow the run in place (model calls arrive while the page is open).
        assert len(out["callsSeen"]) >= 2 and len(out["tokensSeen"]) >= 2, out
        final = out["finalIds"]
        assert len(final) == len(set(final)) and len(final) >= 8, final
        assert [int(i) for i in final] == sorted(int(i) for i in final)
        grew = 0
        for snap in out["snapshots"]:
            assert len(snap) == len(set(snap)), f"an event shown twice: {snap}"
            assert snap == final[:len(snap)], f"skipped or out of order: {snap} vs {final}"
            grew = max(grew, len(snap))
        assert grew > len(out["snapshots"][0]), "no event arrived live"
        streams = out["eventStreams"]
        assert out["streamsBeforeCut"] >= 1
        resumed = streams[out["streamsBeforeCut"]:]
        assert resumed, f"the browser did not reconnect after the cut: {streams}"
        assert all(s["path"].startswith("/jobs/1/events?after=") for s in streams), streams
        assert resumed[0]["lastEventId"], f"the reconnect did not resume: {streams}"
        # What the server sent: each event once over all the streams (none repeated after the
        # reconnect, none the page had rendered), and with the rendered ones, every event.
        sent = [i for s in streams for i in s["ids"]]
        assert len(sent) == len(set(sent)), f"the server sent an event twice: {streams}"
        assert not set(sent) & set(out["renderedIds"]), (out["renderedIds"], streams)
        assert out["renderedIds"] + sent == final[:len(out["renderedIds"]) + len(sent)]
        assert sent and any(s["ids"] for s in resumed), f"nothing arrived after the cut: {streams}"
        # 3. The finished page: the answer first.
        assert out["h1"] == rig.title
        assert out["issueHref"].endswith(f"/{REPO}/issues/1")
        assert out["outcome"].startswith("Proven fix"), out["outcome"]
        assert "/pull/" in out["prHref"] and out["prHref"] in out["outcome"]
        assert out["state"] == "succeeded"
        for field in ("Cost", "Tokens", "Duration", "Rounds"):
            assert field in out["summary"], field
        assert "Reproduction test" in out["evidence"] and "Test suite" in out["evidence"]
        assert "exit 1" in out["evidence"] and "passed" in out["evidence"], out["evidence"]
        assert "return 0.0" in out["diff"]
        assert out["headings"][:5] == [rig.title, "Timeline", "Evidence", "Diff", "Details"]
        for h in ("Model calls", "Tool calls", "Sandbox commands", "Tester runs"):
            assert h in out["headings"], h
        # Folded until opened.
        assert out["groupOpen"] is False
        assert out["itemVisibleFolded"] is False and out["itemVisibleOpened"] is True
        assert any("pytest" in c and "exit 1" in c for c in out["sandboxCommands"])
        assert any("pytest" in c and "exit 0" in c for c in out["sandboxCommands"])
        assert any("test_mean_of_empty_list_is_zero" in t for t in out["tests"])
        assert out["a11yDone"] == [], out["a11yDone"]
        assert out["a11yRunning"] == [], out["a11yRunning"]
        # "Show all": the whole text.
        whole = out["wholeDiff"]
        assert whole["status"] == 200 and whole["type"].startswith("text/plain")
        assert "return 0.0" in whole["text"] and whole["text"].startswith("diff --git")
        # The trajectory download: the job's JSONL, every line an event.
        assert out["trajectoryName"] == "job-1-trajectory.jsonl"
        lines = [json.loads(ln) for ln in out["trajectory"].splitlines() if ln.strip()]
        assert {"llm_usage", "tool_result", "end"} <= {e.get("type") for e in lines}
        # Filters, kept in the URL.
        assert "state=succeeded" in out["filterUrl"] and "repo=octo%2Fcalc" in out["filterUrl"]
        assert out["filterMatch"] == 1 and out["filterListState"].startswith("succeeded")
        assert out["filterOther"] == 0 and "No jobs to show" in out["filterOtherText"]
        # JavaScript off: the same content, served as HTML.
        plain = out["plain"]
        assert plain["h1"] == rig.title and plain["outcome"] == out["outcome"]
        assert plain["state"] == "succeeded" and "return 0.0" in plain["diff"]
        assert plain["headings"] == out["headings"]
        assert plain["events"] == len(final) and plain["scriptRan"] == 0
        assert plain["foldOpens"] is True
        assert plain["listRows"] == 1 and plain["listTitle"].strip() == rig.title
        assert plain["a11y"] == [] and plain["listA11y"] == [], plain
        # The checker finds what it looks for.
        probe = " | ".join(out["a11yProbe"])
        for found in ("skips from h3 to h5", "faint", "#nolabel"):
            assert found in probe, (found, probe)
    finally:
        labeller.join(timeout=1)
        rig.stop()
