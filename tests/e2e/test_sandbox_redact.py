"""Sandbox output is redacted before the head+tail output cap, not after it.

A registered secret that the command prints across the cut (the end of the head on stdout,
the start of the tail on stderr) used to survive in part: the capped text no longer held the
whole value, so the later redaction could not recognise it. Now every byte passes through a
redaction stream first, and the streaming callback sees the same redacted bytes. Real Docker
engine (runc), a unique owner id per test."""
import json
import os
import pathlib
import secrets
import subprocess

from sandbox_util import sandbox_factory  # noqa: F401 (fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIECE = 9  # no run of this many bytes of the secret may come out


def canary():
    # Letters and digits only: no built-in token pattern, only the registration masks it.
    return "cnry" + secrets.token_hex(18)


def pieces(secret):
    return {secret[i:i + PIECE] for i in range(len(secret) - PIECE + 1)}


def leaked(secret, text):
    return sorted(p for p in pieces(secret) if p in text)


def test_secret_across_the_capture_cut_is_masked(sandbox_factory):  # noqa: F811
    sb = sandbox_factory("runc")
    secret = canary()
    assert len(secret) == 40
    probe = (pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build"))
             / "tests/sandbox/sbx_redact_probe").resolve()
    assert probe.exists(), f"{probe} is missing: build first"
    proc = subprocess.run([str(probe), "4096"], env=dict(sb.env, AP_CANARY=secret),
                          cwd=sb.tmp, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["exit"] == 0 and res["truncated"] is True, res
    out, err, stream = res["out"], res["err"], res["stream"]
    # The layout is as intended: the head ends inside the secret's place, the tail starts in it.
    assert out.startswith("a" * 2028) and out.endswith("b" * 2048), out[:40]
    assert "bytes dropped" in out and "bytes dropped" in err
    assert err.startswith("c" * 2048) and err.endswith("d" * 2028), err[-40:]
    # Nothing of the secret is left, only the mask where the head/tail held part of it.
    for name, text in (("stdout", out), ("stderr", err), ("on_output", stream)):
        assert not leaked(secret, text), (name, leaked(secret, text))
    assert "a" * 2028 + "***" in out, out[2000:2060]
    assert "***" + "d" * 2028 in err, err[-2060:-2000]
    # The callback got everything, redacted: both fills whole and the mask twice.
    assert res["stream_len"] == len(stream)
    for c, n in (("a", 2028), ("b", 6000), ("c", 6000), ("d", 2028)):
        assert stream.count(c) == n, (c, stream.count(c))
    assert stream.count("***") == 2


def test_cli_streams_redacted_output(sandbox_factory, tmp_path):  # noqa: F811
    """`autopatch sandbox run` prints through the streaming callback: a secret from .env
    (the box never gets it) that the command prints from a repo file is masked there too,
    also when it arrives a few bytes per write and straddles the CLI's 4 KiB capture cut."""
    sb = sandbox_factory("runc")
    secret = canary()
    (sb.tmp / ".env").write_text(f"WEBHOOK_SECRET={secret}\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "c.txt").write_text(secret)
    script = ("head -c 2040 /dev/zero | tr '\\0' x; i=1; while [ $i -le 40 ]; do "
              "cut -c$i-$((i + 4)) /repo/c.txt | tr -d '\\n'; i=$((i + 5)); done; "
              "head -c 5000 /dev/zero | tr '\\0' z; echo; cat /repo/c.txt >&2")
    proc = sb.run("sh", "-c", script, repo=repo, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("x") == 2040 and proc.stdout.count("z") == 5000
    assert "x" * 2040 + "***" + "z" in proc.stdout
    assert "***" in proc.stderr
    assert not leaked(secret, proc.stdout), leaked(secret, proc.stdout)
    assert not leaked(secret, proc.stderr), leaked(secret, proc.stderr)
