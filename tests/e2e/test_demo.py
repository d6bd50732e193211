"""`autopatch demo`: the README's first command runs the whole label -> PR loop locally and
exits 0 only when the PR exists and every process it started has stopped."""
import os
import pathlib
import re
import signal
import subprocess
import time
import uuid

from model_stub import StubServer
from pipeline_util import happy_script


def demo_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOPATCH_LLM_", "OPENAI_", "ANTHROPIC_"))}
    env["AUTOPATCH_OWNER_ID"] = "demo-e2e-" + uuid.uuid4().hex[:12]
    env["AUTOPATCH_ENV_FILE"] = "/dev/null"
    return env


def processes_of(owner):
    """PIDs whose environment carries our unique owner id: every child the demo started
    (the GitHub and model stand-ins, `autopatch serve`) inherits it."""
    marker = f"AUTOPATCH_OWNER_ID={owner}".encode()
    found = []
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, PermissionError, ProcessLookupError, IndexError):
            continue
        if marker in env and state != "Z":
            found.append(int(d.name))
    return found


def containers_of(owner):
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=autopatch.owner={owner}"],
                         capture_output=True, text=True)
    return out.stdout.split()


def kill_leftovers(owner):
    for pid in processes_of(owner):  # only processes carrying this test's own owner id
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    ids = containers_of(owner)
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)


def test_demo_opens_a_pr_and_cleans_up(autopatch_bin, repo_root, tmp_path):
    env = demo_env()
    owner = env["AUTOPATCH_OWNER_ID"]
    before = set(os.listdir("/tmp"))
    try:
        out = subprocess.run([str(autopatch_bin), "demo"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        text = out.stdout + out.stderr
        assert out.returncode == 0, text[-6000:]
        assert "REPLAYS A RECORDED SESSION" in text
        assert "posted a signed issues.labeled delivery" in text
        assert "progress comment" in text and "Building" in text
        assert "draft pull request: http://127.0.0.1:" in text
        assert "/pull/" in text
        assert "+        return 0.0" in text          # the diff
        assert "Fixes #1" in text and "Evidence" in text  # the PR body with its evidence
        assert "every process has stopped" in text
        serve_pid = int(re.search(r"autopatch serve on \S+ \(pid (\d+)", text).group(1))
        # No process (stand-ins, `autopatch serve`) and no temporary directory left behind.
        assert processes_of(owner) == []
        assert not pathlib.Path(f"/proc/{serve_pid}").exists() or \
            "Z" in pathlib.Path(f"/proc/{serve_pid}/stat").read_text().rsplit(")", 1)[1][:3]
        leftover = [d for d in set(os.listdir("/tmp")) - before
                    if d.startswith("autopatch-demo-")]
        assert leftover == []
        assert containers_of(owner) == []
    finally:
        kill_leftovers(owner)


def test_demo_uses_a_configured_model_and_says_so(autopatch_bin, tmp_path):
    # AUTOPATCH_LLM_* names a model: the demo must use it and must not claim to replay a
    # recording. The "real" model here is the scripted stand-in under another name.
    env = demo_env()
    owner = env["AUTOPATCH_OWNER_ID"]
    model = StubServer(happy_script()).start()
    env.update(AUTOPATCH_LLM_PROVIDER="openai", AUTOPATCH_LLM_BASE_URL=model.url + "/v1",
               AUTOPATCH_LLM_MODEL="configured-model-x", AUTOPATCH_LLM_API_KEY="k-" + owner)
    try:
        out = subprocess.run([str(autopatch_bin), "demo"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        text = out.stdout + out.stderr
        assert out.returncode == 0, text[-6000:]
        assert "REPLAYS" not in text
        assert "configured-model-x" in text
        reqs = model.requests()
        assert reqs, "the configured model was never called"
        assert all(r["body"].get("model") == "configured-model-x" for r in reqs)
        assert "draft pull request: http://127.0.0.1:" in text
        assert processes_of(owner) == []
    finally:
        model.stop()
        kill_leftovers(owner)


def test_sigterm_stops_every_child(autopatch_bin, tmp_path):
    env = demo_env()
    owner = env["AUTOPATCH_OWNER_ID"]
    proc = subprocess.Popen([str(autopatch_bin), "demo"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.time() + 120
        for line in proc.stdout:
            lines.append(line)
            if "autopatch serve on" in line or time.time() > deadline:
                break
        assert any("autopatch serve on" in ln for ln in lines), "".join(lines)
        assert len(processes_of(owner)) >= 3  # both stand-ins and serve are running
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=90)
        text = "".join(lines) + rest
        assert proc.returncode == 128 + signal.SIGTERM, text[-4000:]
        assert "every process the demo started has stopped" in text
        time.sleep(0.5)
        assert processes_of(owner) == [], "a child of the demo survived its SIGTERM"
        deadline = time.time() + 30  # serve removes its warm boxes as it stops
        while containers_of(owner) and time.time() < deadline:
            time.sleep(0.5)
        assert containers_of(owner) == []
        dirs = re.findall(r"autopatch demo in (\S+)", text)
        assert dirs and not pathlib.Path(dirs[0]).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(owner)
        for d in re.findall(r"autopatch demo in (\S+)", "".join(lines)):
            subprocess.run(["rm", "-rf", "--", d])
