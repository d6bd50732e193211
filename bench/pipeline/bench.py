#!/usr/bin/python3
"""bench/pipeline - latency of the label -> PR loop on examples/calc (prints figures only).

With a scripted model that answers at once, measures over several runs:
  delivery -> first model request   (webhook, queue, worker, token, checkout, sandbox, setup)
  Tester pass -> PR created         (apply, commit, push, find-or-create the draft PR)
and prints the medians. Targets: <= 2 s and <= 1 s.

Usage: /usr/bin/python3 bench/pipeline/bench.py [--runs N] [--build DIR]
"""
import argparse
import datetime
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "standins"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from pipeline_util import Rig  # noqa: E402


def parse_time(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def one_run(bin_path, tmp, spacing_ms):
    rig = Rig(tmp, bin_path, env={"AUTOPATCH_LOG_LEVEL": "info",
                                  "AUTOPATCH_GH_WRITE_SPACING_MS": str(spacing_ms)}).start()
    try:
        t_post = time.time()
        assert rig.label() == 202
        rig.wait(lambda: rig.job_done(1), 300, "the job")
        job = rig.jobs()[0]
        assert job["state"] == "succeeded", job
        first_model = min(r["time"] for r in rig.model.requests())
        out = subprocess.run([str(bin_path), "jobs", "--id", str(job["id"]), "--json"],
                             env=rig.env(), capture_output=True, text=True, check=True)
        events = json.loads(out.stdout)["events"]
        proven = [parse_time(e["time"]) for e in events
                  if e.get("message") and ": proven" in e["message"]]
        pr_posts = [r["time"] for r in rig.gh.requests()
                    if r["method"] == "POST" and r["path"].endswith("/pulls")]
        return first_model - t_post, pr_posts[-1] - proven[-1]
    finally:
        rig.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--write-spacing-ms", type=int, default=1000,
                    help="AUTOPATCH_GH_WRITE_SPACING_MS (the server default is 1000)")
    args = ap.parse_args()
    bin_path = pathlib.Path(args.build) / "autopatch"
    to_model, to_pr = [], []
    for i in range(args.runs):
        tmp = tempfile.mkdtemp(prefix="ap-bench-")
        try:
            a, b = one_run(bin_path, tmp, args.write_spacing_ms)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        to_model.append(a)
        to_pr.append(b)
        print(f"run {i + 1}: delivery -> first model request {a:.3f} s, "
              f"Tester pass -> PR created {b:.3f} s", flush=True)
    print(f"median over {args.runs} runs (GitHub write spacing {args.write_spacing_ms} ms): delivery -> first model request "
          f"{statistics.median(to_model):.3f} s (target <= 2 s); Tester pass -> PR created "
          f"{statistics.median(to_pr):.3f} s (target <= 1 s)")


if __name__ == "__main__":
    main()
