#!/usr/bin/python3
"""bench/environments - what the environment cache saves (prints figures, never fails).

A copy of examples/calc whose setup takes >= 20 s and leaves a 100 MB environment
(`sleep 20` and 100 MB of random bytes under .venv/), fixed twice with `autopatch fix` and a
scripted model that answers at once, sharing one data dir:

  job start -> first Builder request, without a cache hit (setup runs) and with one (restored)
  the restore time of the 100 MB environment, and the archive's size

Targets: the hit saves >= 90 % of the setup time; restore <= 2 s.

Usage: /usr/bin/python3 bench/environments/run.py [--build DIR] [--setup-seconds N] [--mb N]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "standins"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from agents_util import CALC, fix_env, happy, make_calc_repo, new_owner  # noqa: E402
from model_stub import StubServer  # noqa: E402


def one_fix(bin_path, home, repo):
    stub = StubServer(happy()).start()
    try:
        e = fix_env(home, stub, "openai", new_owner())
        t0 = time.time()
        p = subprocess.run([str(bin_path), "fix", "--repo", str(repo), "--issue-file",
                            str(CALC / "ISSUE.md")], cwd=home, env=e, capture_output=True,
                           text=True, timeout=900)
        reqs = stub.requests()
    finally:
        stub.stop()
    builder = [r for r in reqs if r["role"] == "builder"]
    first = min(r["time"] for r in builder) - t0 if builder and "time" in builder[0] else None
    return p, first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--setup-seconds", type=int, default=20)
    ap.add_argument("--mb", type=int, default=100)
    a = ap.parse_args()
    bin_path = pathlib.Path(a.build) / "autopatch"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        setup = (f"mkdir -p .venv && head -c {a.mb * 1000000} /dev/urandom > .venv/blob && "
                 f"sleep {a.setup_seconds}")
        repo = make_calc_repo(tmp, {".github/autopatch.yml": f"setup: {setup}\n"})
        home = tmp / "home"
        home.mkdir()
        cold, t_cold = one_fix(bin_path, home, repo)
        warm, t_warm = one_fix(bin_path, home, repo)
        for name, p in (("cold", cold), ("warm", warm)):
            if "PROVEN" not in p.stdout:
                print(f"{name} run did not prove the fix:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        ran = re.search(r"setup ran \((\d+) s\)", cold.stdout)
        hit = re.search(r"environment restored from cache \(key (\w+), ([\d.]+) MB, ([\d.]+) s\)",
                        warm.stdout)
        print(f"machine: {os.cpu_count()} CPUs; setup: sleep {a.setup_seconds} + {a.mb} MB")
        if t_cold is not None and t_warm is not None:
            saved = t_cold - t_warm
            setup_s = float(ran.group(1)) if ran else float("nan")
            print(f"job start -> first Builder request: {t_cold:.1f} s without a cache hit, "
                  f"{t_warm:.1f} s with one")
            print(f"saved: {saved:.1f} s = {100 * saved / setup_s:.0f} % of the setup time "
                  f"({setup_s:.0f} s; target >= 90 %)")
        if hit:
            print(f"restore of the environment: {float(hit.group(3)):.2f} s (target <= 2 s)")
            print(f"archive size: {hit.group(2)} MB")
        else:
            print("no cache hit on the second run:\n" + warm.stdout[-2000:])


if __name__ == "__main__":
    main()
