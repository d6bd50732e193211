"""The library side of the sandbox through tests/sandbox/sbx_probe: the warm pool (fills in
the background, one box per job, bounded, refills), stdin with EOF, and the head+tail output
cap. Real Docker engine; a unique owner id per test."""
import json
import os
import pathlib
import subprocess

import pytest

from sandbox_util import IMAGE, owned, sandbox_factory  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]


def probe_bin():
    path = (pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build")) / "tests/sandbox/sbx_probe").resolve()
    assert path.exists(), f"{path} is missing: build first"
    return str(path)


def probe(sb, *args, env=None, timeout=240):
    e = dict(sb.env)
    e.update(env or {})
    r = subprocess.run([probe_bin(), *args], env=e, capture_output=True, text=True,
                       timeout=timeout, cwd=sb.tmp)
    assert r.returncode == 0, r.stderr
    return {rec["op"]: rec for rec in map(json.loads, r.stdout.splitlines())}


def test_warm_pool_one_box_per_job_bounded_and_refilled(sandbox_factory):
    sb = sandbox_factory()
    out = probe(sb, "pool", env={"AUTOPATCH_SANDBOX_POOL": "2"})
    # Filled ahead, to exactly its size.
    assert out["filled"]["ready"] == 2
    assert out["filled"]["containers"] == 2
    # Three jobs got three different boxes (two warm, one created when the pool ran dry).
    iso = out["isolation"]
    assert len({iso["a_id"], iso["b_id"], iso["c_id"]}) == 3
    # Each box saw its own repo dir, and B cannot see what A wrote.
    assert iso["a_out"] == "repo-a"
    assert iso["b_repo"] == "repo-b"
    assert iso["b_sees_owner"] is False
    # While refilling: never more than the pool size beyond the boxes in use.
    assert out["bounded"]["max_containers"] <= 3 + 2
    assert out["bounded"]["ready"] == 2
    # Destroy removes the box and its repo dir; only the refilled pool remains.
    assert out["destroyed"]["repo_dir_left"] is False
    assert out["destroyed"]["containers"] == 2
    # Freeing the engine destroys the pool: nothing left (checked by the fixture too).
    assert owned(sb.owner) == []


def test_warm_acquire_is_fast(sandbox_factory):
    sb = sandbox_factory()
    r = subprocess.run([probe_bin(), "warm", "3"], env=dict(sb.env, AUTOPATCH_SANDBOX_POOL="1"),
                       capture_output=True, text=True, timeout=240, cwd=sb.tmp)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(recs) == 3
    # A ready box is handed over without talking to the daemon.
    assert sorted(x["acquire_ms"] for x in recs)[1] <= 20


def test_stdin_then_eof_and_output_cap(sandbox_factory):
    sb = sandbox_factory()
    out = probe(sb, "stdin")
    # 3 MiB of stdin arrived whole and the command saw EOF (cat returned).
    assert out["stdin"]["exit"] == 0
    assert out["stdin"]["out"] == str(3 << 20)
    # 1 MB of output with a 64-byte cap: the head and the tail survive, marked truncated.
    cap = out["cap"]
    assert cap["exit"] == 0 and cap["truncated"] is True
    assert cap["head"] == "START" and cap["tail"] == "END"
    assert cap["len"] < 64 + 64
