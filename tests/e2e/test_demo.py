"""`autopatch demo`: the README's first command runs the whole label -> PR loop locally and
exits 0 only when the PR exists and every process it started has stopped."""
import os
import subprocess


def test_demo_opens_a_pr_and_cleans_up(autopatch_bin, repo_root, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOPATCH_LLM_", "OPENAI_", "ANTHROPIC_"))}
    env["AUTOPATCH_OWNER_ID"] = "demo-e2e-" + str(os.getpid())
    env["AUTOPATCH_ENV_FILE"] = "/dev/null"
    before = set(os.listdir("/tmp"))
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
    # No process and no temporary directory left behind.
    ps = subprocess.run(["pgrep", "-f", "github_stub.py|model_stub.py"], capture_output=True,
                        text=True)
    mine = [p for p in ps.stdout.split() if p]
    for pid in mine:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                assert b"demo-e2e-" + str(os.getpid()).encode() not in f.read()
        except FileNotFoundError:
            pass
    leftover = [d for d in set(os.listdir("/tmp")) - before if d.startswith("autopatch-demo-")]
    assert leftover == []
    docker = subprocess.run(["docker", "ps", "-aq", "--filter",
                             f"label=autopatch.owner={env['AUTOPATCH_OWNER_ID']}"],
                            capture_output=True, text=True)
    assert docker.stdout.split() == []
