"""The console while a demo job runs (the calc example: GitHub and model stand-ins, real
sandbox): the list shows it running, its events arrive on the job page live (Server-Sent
Events), and the finished page shows the diff, per-test results, evidence and the PR link.
Then the trajectory downloads as JSONL, the list's filters work, the pages read the same with
JavaScript off, and no page has an accessibility problem (lang, one h1, no skipped heading
level, labelled controls, named buttons and links, header scopes, WCAG AA contrast)."""
import json

from pipeline_util import REPO, Rig, happy_script
from server_util import free_port


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
    try:
        assert rig.label() == 202
        out = browser("live.mjs", console=f"http://127.0.0.1:{admin}", repo=REPO)
        assert out["listState"] in ("queued", "running")
        assert out["liveAttr"] == "1"
        assert out["liveEvents"] >= 1
        assert out["state"].startswith("succeeded"), rig.log_text()[-3000:]
        assert "return 0.0" in out["diff"]
        assert "passed" in out["tests"]
        assert any("test_mean_of_empty_list_is_zero" in t for t in out["tests"])
        assert "Reproduction test" in out["evidence"]
        # Every command the tools ran in the box, with its exit status and time.
        assert any("pytest" in c and "exit 1" in c for c in out["sandboxCommands"])
        assert any("pytest" in c and "exit 0" in c for c in out["sandboxCommands"])
        for h in ("Timeline", "Model calls", "Tool calls", "Sandbox commands", "Tester runs",
                  "Diff", "Evidence"):
            assert h in out["headings"], h
        # The trajectory download: the job's JSONL, every line an event.
        assert out["trajectoryName"] == "job-1-trajectory.jsonl"
        lines = [json.loads(ln) for ln in out["trajectory"].splitlines() if ln.strip()]
        types = {e.get("type") for e in lines}
        assert {"llm_usage", "tool_result", "end"} <= types, types
        assert "return 0.0" in next(e for e in lines if e.get("type") == "end")["diff"]
        # Filters: succeeded + this repository shows the job; failed shows nothing.
        assert out["filterMatch"] == 1
        assert out["filterOther"] == 0 and "No jobs to show" in out["filterOtherText"]
        # JavaScript off: the same content, served as HTML (no live rows were added).
        plain = out["plain"]
        assert plain["state"].startswith("succeeded") and "return 0.0" in plain["diff"]
        assert any("test_mean_of_empty_list_is_zero" in t for t in plain["tests"])
        assert plain["headings"] == out["headings"]
        assert plain["events"] >= 1 and plain["scriptRan"] == 0
        assert plain["listRows"] == 1
        # Accessibility, in the rendering browser.
        assert out["a11y"] == {"job": [], "list": []}, out["a11y"]
        assert plain["a11y"] == [], plain["a11y"]
        probe = " | ".join(out["a11yProbe"])
        for found in ("skips from h1 to h4", "faint", "#nolabel"):
            assert found in probe, (found, probe)
    finally:
        rig.stop()
