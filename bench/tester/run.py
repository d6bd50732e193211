#!/usr/bin/python3
"""bench/tester - what the Tester costs, as ratios to one direct run of the same suite in the
same box (issue 10, "Performance").

For a small suite and for the 20,000-test fixture (tests/e2e/proof_util.py) it runs
`autopatch fix` with a scripted model whose Builder
  1. writes a reproduction test and a fix that also breaks one test,
  2. runs the suite itself (`run` tool, in the workspace: a direct run),
  3. calls finish: round 1, rejected for the regression after a full check,
  4. removes the regression, runs the suite directly again, and calls finish: round 2, proven.
The direct time is the mean of the two direct runs (the build machine is shared and noisy).
Each measurement is two jobs on the same commit and data directory: the 1st runs the baseline
(as every job did before issue 26), the 2nd reuses its per-test results (job/baseline_cache.c).
From each job's trajectory it prints:
  first round   baseline (setup + pristine suite) + round 1 (finish to verdict)   target <= 2.0x
  next round    round 2, finish to verdict (the baseline and the pristine repro are reused)
                                                                                  target <= 1.1x
  and the seconds from finish to verdict on the small suite.
Each round runs its repro lane and its suite lane side by side (AUTOPATCH_TESTER_SIDE_BY_SIDE,
on by default); `--side-by-side both` measures off and on alternately in one invocation (the
"before" and "after" of that change under the same load). Tester runs take spare boxes made
ahead of time (AUTOPATCH_TESTER_SPARES, 2 by default); `--spares both` measures 0 and 2
alternately likewise (with `--side-by-side both`: all four combinations).
Not a test: it prints figures and never fails on them.
Usage: bench/tester/run.py [-n 1] [--big 20000] [--small 40] [--side-by-side on|off|both]
                           [--spares 0|2|both]
       (-n 3 on a shared machine)
Needs the build (build/autopatch), Docker and the sandbox image.
"""
import argparse
import json
import os
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
for d in ("standins", "tests/fakes", "tests/e2e"):
    if (ROOT / d).is_dir():
        sys.path.insert(0, str(ROOT / d))

from proof_util import BIG_ISSUE, finish, fix, gen_suite, make_repo, replace, script, write  # noqa: E402
from agents_util import call  # noqa: E402

SUITE_CMD = "python3 -m pytest -q"
REPRO = "tests/test_halve_negative.py"


def model_script():
    return script(
        write(REPRO, """
            import mathx


            def test_halve_negative():
                assert mathx.halve(-3) == -1
            """),
        replace("mathx.py", "    return i // 2\n", "    return int(i / 2)\n"),
        replace("mathx.py", "    return i + i\n", "    return i + i + (i == 7)\n"),
        call("run", command=SUITE_CMD, timeout_s=600),
        finish(REPRO, "python3 -m pytest -q " + REPRO),
        replace("mathx.py", "    return i + i + (i == 7)\n", "    return i + i\n"),
        call("run", command=SUITE_CMD, timeout_s=600),
        finish(REPRO, "python3 -m pytest -q " + REPRO))


def one_job(autopatch, tmp, repo, mode):
    side_by_side, spares = mode
    r = fix(autopatch, tmp, repo, BIG_ISSUE, model_script(),
            args=["--test", SUITE_CMD, "--max-iterations", "2"], timeout=1800,
            env={"AUTOPATCH_TESTER_SIDE_BY_SIDE": side_by_side,
                 "AUTOPATCH_TESTER_SPARES": spares})
    if r.code != 0:
        raise SystemExit("the benchmark run did not end proven:\n%r" % r)
    boxes = re.search(r"Tester boxes: (\d+) fresh box(?:es)? for \d+ runs?, (\d+) of them", r.out)
    f = figures([json.loads(x) for x in r.traj_path.read_text().splitlines()])
    f["boxes"], f["warm"] = (int(boxes[1]), int(boxes[2])) if boxes else (0, 0)
    return f


def measure(autopatch, n_tests, mode):
    """Two jobs on the same commit and data directory: the first runs the baseline, the
    second reuses its per-test results (job/baseline_cache.c)."""
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        repo = make_repo(tmp, gen_suite(n_tests))
        first = one_job(autopatch, tmp, repo, mode)
        second = one_job(autopatch, tmp, repo, mode)
    first.update({k + "_2": v for k, v in second.items()})
    return first


def figures(ev):
    t_base0 = next(e["t"] for e in ev if e["type"] == "progress"
                   and e["line"].startswith("baseline: running"))
    t_base1 = next(e["t"] for e in ev if e["type"] == "tester_baseline")
    starts = [e["t"] for e in ev if e["type"] == "progress" and "Tester checks" in e["line"]]
    ends = [e["t"] for e in ev if e["type"] == "verdict"]
    # Two direct runs (before round 1 and before round 2): the machine is shared, take the mean.
    directs = [e["millis"] for e in ev if e["type"] == "tool_result" and e["name"] == "run"]
    direct = sum(directs) / len(directs)
    return {"baseline": (t_base1 - t_base0) / 1000, "round1": (ends[0] - starts[0]) / 1000,
            "round2": (ends[1] - starts[1]) / 1000, "direct": direct / 1000}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1,
                    help="runs per suite; the best (lowest) of each figure is printed, the "
                         "figure least disturbed by other work on a shared machine")
    ap.add_argument("--big", type=int, default=20000)
    ap.add_argument("--small", type=int, default=40)
    ap.add_argument("--side-by-side", choices=("on", "off", "both"), default="on",
                    help="AUTOPATCH_TESTER_SIDE_BY_SIDE for the jobs; both: off and on "
                         "alternately, each printed")
    ap.add_argument("--spares", choices=("0", "2", "both"), default="2",
                    help="AUTOPATCH_TESTER_SPARES for the jobs; both: 0 and 2 alternately")
    a = ap.parse_args()
    autopatch = pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build")) / "autopatch"
    lanes = ["off", "on"] if a.side_by_side == "both" else [a.side_by_side]
    spares = ["0", "2"] if a.spares == "both" else [a.spares]
    modes = [(ln, sp) for ln in lanes for sp in spares]
    print("tests  lanes spares job  direct_s  baseline_s  round1_s  round2_s  first_round  "
          "next_round  warm/boxes")
    small = {}
    for n in (a.small, a.big):
        runs = {m: [] for m in modes}
        for _ in range(a.n):
            for m in modes:  # alternately: both see the same load
                runs[m].append(measure(autopatch, n, m))
        for m in modes:
            med = {k: min(x[k] for x in runs[m]) for k in runs[m][0]}
            for job, sfx in (("1st", ""), ("2nd", "_2")):
                first = (med["baseline" + sfx] + med["round1" + sfx]) / med["direct" + sfx]
                nxt = med["round2" + sfx] / med["direct" + sfx]
                print("%-6d %-5s %-6s %-4s %8.2f  %10.2f  %8.2f  %8.2f  %10.2fx  %9.2fx  %d/%d" % (
                    n, m[0], m[1], job, med["direct" + sfx], med["baseline" + sfx],
                    med["round1" + sfx], med["round2" + sfx], first, nxt, med["warm" + sfx],
                    med["boxes" + sfx]))
            if n == a.small:
                small[m] = med
    print("targets: first round <= 2.0x, next round <= 1.1x (of one direct suite run)")
    for m in modes:
        print("small suite, lanes %s, spares %s, finish to verdict: round 1 %.2f s, round 2 "
              "%.2f s" % (m[0], m[1], small[m]["round1"], small[m]["round2"]))


if __name__ == "__main__":
    main()
