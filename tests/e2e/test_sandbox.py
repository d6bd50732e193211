"""`autopatch sandbox run` basics against the real Docker engine: streaming, exit codes,
the repository copy, timeouts, stdin-less commands and cleanup, on runc and on runsc."""
import json
import pathlib
import subprocess

import pytest

from sandbox_util import RUNTIMES, bridge_gateway, owned, sandbox_factory  # noqa: F401 (fixture)


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()
    (d / "hello.txt").write_text("hello from the repo\n")
    (d / "sub").mkdir()
    (d / "sub" / "x.py").write_text("print(6 * 7)\n")
    return d


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_run_streams_output_and_exit_code(sandbox_factory, repo, runtime):
    sb = sandbox_factory(runtime)
    r = sb.run("sh", "-c", "cat hello.txt; python3 sub/x.py; pwd; echo to-stderr >&2; exit 7",
               repo=repo, text=True)
    assert r.returncode == 7, r.stderr
    assert r.stdout == "hello from the repo\n42\n/tmp/workspace\n"
    assert "to-stderr" in r.stderr
    assert sb.leftovers() == []


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_workspace_is_writable_copy_and_repo_is_not(sandbox_factory, repo, runtime):
    sb = sandbox_factory(runtime)
    r = sb.run("sh", "-c",
               "echo changed > hello.txt && cat hello.txt && git init -q . && git status --short"
               " | head -3; if echo x > /repo/hello.txt; then echo REPO-WRITABLE; fi; "
               "cat /repo/hello.txt", repo=repo, text=True)
    assert r.returncode == 0, r.stderr
    assert "changed" in r.stdout
    assert "REPO-WRITABLE" not in r.stdout
    assert "hello from the repo" in r.stdout
    assert (repo / "hello.txt").read_text() == "hello from the repo\n"


def test_argv_is_not_a_shell_string(sandbox_factory):
    sb = sandbox_factory()
    r = sb.run("echo", "$(id)", ";", "rm", "-rf", "/", text=True)
    assert r.returncode == 0
    assert r.stdout == "$(id) ; rm -rf /\n"


def test_timeout_exits_124_with_message(sandbox_factory):
    sb = sandbox_factory()
    r = sb.run("sh", "-c", "echo started; sleep 60", timeout=2, text=True)
    assert r.returncode == 124
    assert "started" in r.stdout
    assert "timed out" in r.stderr
    assert sb.leftovers() == []


def test_missing_command_and_bad_usage(sandbox_factory):
    sb = sandbox_factory()
    r = sb.run("definitely-not-a-command", text=True)
    assert r.returncode == 127
    r = subprocess.run([sb.binary, "sandbox", "run", "--timeout", "x", "--", "true"],
                       env=sb.env, capture_output=True, text=True)
    assert r.returncode == 2


def test_unreachable_daemon_is_one_clear_line(sandbox_factory, tmp_path, port):
    if sandbox_factory.backend == "kubernetes":
        # A kubeconfig naming a server nobody listens on.
        sb = sandbox_factory()
        kc = json.loads(pathlib.Path(sb.env["KUBECONFIG"]).read_text())
        kc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
        pathlib.Path(sb.env["KUBECONFIG"]).write_text(json.dumps(kc))
        r = sb.run("true", text=True)
        assert r.returncode == 125
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "cannot reach the Kubernetes API" in lines[0]
        assert f"127.0.0.1:{port}" in lines[0]
        return
    sb = sandbox_factory(extra_env={"DOCKER_HOST": f"unix://{tmp_path}/nope.sock"})
    r = sb.run("true", text=True)
    assert r.returncode == 125
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "cannot reach the Docker daemon" in lines[0]
    assert "nope.sock" in lines[0]


def test_missing_image_names_the_daemon_message(sandbox_factory):
    sb = sandbox_factory()
    r = sb.run("true", args=("--image", "autopatch-no-such-image:0"), text=True)
    assert r.returncode == 125
    assert "no such image" in r.stderr.lower() or "not found" in r.stderr.lower()


def test_reap_spares_live_runs_unless_all(sandbox_factory):
    import time
    sb = sandbox_factory()
    proc = sb.popen("sleep", "300", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(300):
        if owned(sb.owner):
            break
        time.sleep(0.1)
    assert len(owned(sb.owner)) == 1
    r = sb.reap()
    assert r.returncode == 0 and "removed 0" in r.stdout, r.stdout + r.stderr
    assert len(owned(sb.owner)) == 1  # its creator is alive
    r = sb.reap("--all")
    assert r.returncode == 0 and "removed 1" in r.stdout
    assert owned(sb.owner) == []
    # The run notices its box is gone and ends instead of hanging.
    rc = proc.wait(timeout=30)
    assert rc != 0


def test_allow_list_box_gets_only_the_proxy_and_is_cleaned_up(sandbox_factory):
    # The proxy itself is tested in test_egress.py (test_k8s_egress.py on Kubernetes); here:
    # the backend wiring from the CLI.
    extra = {}
    if sandbox_factory.backend == "kubernetes":
        # Without the replica's egress address: refused with a sentence, nothing created.
        sb = sandbox_factory()
        r = sb.run("true", args=("--allow", "mirror.invalid:80"), text=True)
        assert r.returncode == 125 and "allow-list" in r.stderr, r.stderr
        assert sb.leftovers() == []
        gw = bridge_gateway()
        extra = {"AUTOPATCH_K8S_EGRESS_ADDRESS": gw}
    sb = sandbox_factory(extra_env=extra)
    r = sb.run("sh", "-c", "env | grep -c '^HTTPS_PROXY=http://'; python3 -c \"import socket\n"
               "try:\n socket.create_connection(('1.1.1.1', 80), 2); print('DIRECT')\n"
               "except OSError: print('blocked')\"",
               args=("--allow", "mirror.invalid:80"), text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "blocked"]
    assert sb.leftovers() == []
    if sb.backend == "kubernetes":
        return  # the runtime is the RuntimeClass's there
    r = sb.run("true", args=("--allow", "mirror.invalid:80", "--runtime", "runsc"), text=True)
    assert r.returncode == 125 and "runsc" in r.stderr
    assert sb.leftovers() == []
