#!/usr/bin/python3
"""bench/sandbox-lifecycle - how long the sandbox's life cycle takes, next to the docker CLI.

Prints, in one run, medians (and p95) in milliseconds and the ratios the issue asks for:
  warm   acquire from the warm pool (+ `true` + destroy)
  cold   create + start + `true` + destroy through the Engine API
  run    `docker run --rm IMAGE true` (the CLI, same hardening flags that matter for speed)
  exec   one exec round trip of `true` (create + start + inspect) vs `docker exec`
With --kubernetes (default on) the same warm / cold / exec figures follow for the Kubernetes
backend against the API stand-in (standins/k8s_stub, pods as Docker containers), in the same
run. What the stand-in adds, so the figures can be read honestly: each exec is a `docker exec`
CLI process behind the WebSocket (the "docker exec CONTAINER true" row is that cost alone), a
pod is three `docker volume create` + two `docker create` + two `docker start` CLI calls, and
status reads are `docker inspect` calls; a real API server + kubelet + containerd have other
costs (scheduling, image checks, CNI set-up) that the stand-in does not show.
Not a test: it only prints figures. Usage: bench/sandbox-lifecycle/run.py [-n 15] [--runtime runc]
[--no-kubernetes]. Needs the build (build/tests/sandbox/sbx_probe), a running Docker engine and
the stand-in's npm packages (scripts/bootstrap.sh).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(name, xs):
    return {"name": name, "n": len(xs), "p50": statistics.median(xs), "p95": pct(xs, 95)}


def probe(env, *args):
    exe = pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build")) / "tests/sandbox/sbx_probe"
    out = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def timed(argv):
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.monotonic() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--runtime", default="runc")
    ap.add_argument("--no-kubernetes", dest="kubernetes", action="store_false")
    ap.add_argument("--image", default=os.environ.get("AUTOPATCH_SANDBOX_IMAGE",
                                                      "autopatch-sandbox:latest"))
    a = ap.parse_args()
    owner = "bench" + uuid.uuid4().hex[:8]
    tmp = tempfile.mkdtemp(prefix="ap-bench-")
    env = dict(os.environ, AUTOPATCH_OWNER_ID=owner, AUTOPATCH_DATA_DIR=tmp,
               AUTOPATCH_SANDBOX_RUNTIME=a.runtime, AUTOPATCH_SANDBOX_IMAGE=a.image,
               AUTOPATCH_SANDBOX_POOL="1", AUTOPATCH_ENV_FILE=os.devnull)
    labels = ["--label", f"autopatch.owner={owner}", "--label", "autopatch.job=bench"]
    rows = []
    try:
        warm = probe(env, "warm", str(a.n))
        rows.append(summary("warm: acquire only", [r["acquire_ms"] for r in warm]))
        rows.append(summary("warm: acquire + true + destroy", [r["total_ms"] for r in warm]))
        cold = probe(env, "cold", str(a.n))
        rows.append(summary("cold: create + start + true + destroy",
                            [r["total_ms"] for r in cold]))
        run = [timed(["docker", "run", "--rm", "--network", "none", "--runtime", a.runtime,
                      *labels, a.image, "true"]) for _ in range(a.n)]
        rows.append(summary("docker run --rm IMAGE true", run))
        ex = probe(env, "exec", str(a.n))
        rows.append(summary("exec round trip (true)", [r["total_ms"] for r in ex]))
        cid = subprocess.run(["docker", "run", "-d", "--network", "none", "--runtime",
                              a.runtime, *labels, a.image, "sleep", "600"],
                             capture_output=True, text=True, check=True).stdout.strip()
        try:
            dex = [timed(["docker", "exec", cid, "true"]) for _ in range(a.n)]
        finally:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
        rows.append(summary("docker exec CONTAINER true", dex))
    finally:
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=autopatch.owner={owner}"],
                              capture_output=True, text=True).stdout.split()
        if left:
            subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
    if a.kubernetes:
        sys.path.insert(0, str(ROOT / "tests" / "e2e"))
        import k8s_util
        stub = k8s_util.K8sStub(tmp)
        try:
            kenv = dict(env, AUTOPATCH_OWNER_ID="k" + owner)
            kenv.update(stub.env(stub.kubeconfig(pathlib.Path(tmp) / "kubeconfig")))
            warm = probe(kenv, "warm", str(a.n))
            rows.append(summary("k8s warm: acquire only", [r["acquire_ms"] for r in warm]))
            rows.append(summary("k8s warm: acquire + true + destroy",
                                [r["total_ms"] for r in warm]))
            cold = probe(kenv, "cold", str(a.n))
            rows.append(summary("k8s cold: pod + policy + true + delete",
                                [r["total_ms"] for r in cold]))
            ex = probe(kenv, "exec", str(a.n))
            rows.append(summary("k8s exec round trip (true, WebSocket)",
                                [r["total_ms"] for r in ex]))
        finally:
            stub.close()
    by = {r["name"]: r for r in rows}
    print(f"sandbox lifecycle, runtime {a.runtime}, image {a.image}, n={a.n} (ms)")
    print(f"{'operation':42} {'p50':>8} {'p95':>8}")
    for r in rows:
        print(f"{r['name']:42} {r['p50']:8.1f} {r['p95']:8.1f}")
    cold_p50 = by["cold: create + start + true + destroy"]["p50"]
    run_p50 = by["docker run --rm IMAGE true"]["p50"]
    ex_p50 = by["exec round trip (true)"]["p50"]
    dex_p50 = by["docker exec CONTAINER true"]["p50"]
    warm_p50 = by["warm: acquire only"]["p50"]
    print()
    print(f"warm acquire p50 {warm_p50:.1f} ms (target <= 20 ms)")
    print(f"cold / docker run --rm: {cold_p50 / run_p50:.2f} (target <= 1)")
    print(f"exec / docker exec:     {ex_p50 / dex_p50:.2f} (target <= 1)")
    print(f"warm total / cold:      {by['warm: acquire + true + destroy']['p50'] / cold_p50:.2f}")
    if a.kubernetes:
        print(f"k8s warm acquire p50 {by['k8s warm: acquire only']['p50']:.1f} ms (target <= 20 ms)")
        print(f"k8s cold / docker cold: "
              f"{by['k8s cold: pod + policy + true + delete']['p50'] / cold_p50:.2f}")
        print(f"k8s exec / docker-backend exec: "
              f"{by['k8s exec round trip (true, WebSocket)']['p50'] / ex_p50:.2f}; "
              f"k8s exec - docker exec CLI (what the stand-in adds per exec is the CLI): "
              f"{by['k8s exec round trip (true, WebSocket)']['p50'] - dex_p50:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
