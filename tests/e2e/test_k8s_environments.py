"""The environments work (docs/environments.md) on the Kubernetes backend, against the API
stand-in: what a setup phase means when the boxes are pods (docs/kubernetes.md, "Network").

Without AUTOPATCH_K8S_EGRESS_ADDRESS a pod never gets network: a repository that asks for an
egress allow-list for its setup phase (`network:`), or `autopatch sandbox run --allow`, is
refused with a sentence saying what to change, before any pod or policy exists and before any
model call (with it, test_k8s_egress.py). An offline setup runs, and
the environment cache works through the exec stream: the archive comes back on stdout (raw,
never redacted or capped) and is restored over stdin, which only the v5 protocol can end; a
v4-only API server cannot restore, and the job falls back to running setup again.
"""
import subprocess

import pytest

import k8s_util
from agents_util import CALC, brief, fix_env, happy, make_calc_repo, new_owner
from model_stub import StubServer
from sandbox_util import Sandbox

OFFLINE_SETUP = "setup: mkdir -p .venv && echo ok > .venv/marker\n"


def calc_repo(tmp_path, config):
    """examples/calc with config as .github/autopatch.yml, a home dir and a fresh owner id."""
    repo = make_calc_repo(tmp_path, {".github/autopatch.yml": config,
                                     "ISSUE.md": (CALC / "ISSUE.md").read_text()})
    home = tmp_path / "home"
    home.mkdir()
    return repo, home, new_owner()


def run_fix(autopatch_bin, home, repo, stub, owner, env=None, timeout=600, script=None):
    """`autopatch fix` on the Kubernetes backend; the data dir (and so the cache) in home."""
    model = StubServer(script or happy()).start()
    e = fix_env(home, model, "openai", owner, env)
    e.update(stub.env(stub.kubeconfig(home / "kubeconfig")))
    cmd = [str(autopatch_bin), "fix", "--repo", str(repo), "--issue-file",
           str(repo / "ISSUE.md"), "--out", str(home / "patch.diff")]
    try:
        proc = subprocess.run(cmd, cwd=home, env=e, capture_output=True, text=True,
                              timeout=timeout)
        proc.requests = model.requests()
    finally:
        model.stop()
    assert stub.owned_objects(owner) == [], "pods or policies left behind"
    return proc


@pytest.fixture
def stub(tmp_path):
    s = k8s_util.K8sStub(tmp_path / "stub")
    yield s
    s.close()


@pytest.mark.parametrize("config", [
    'setup: pip install -e .\nnetwork: ["pypi.org:443"]\n',
    'network: ["pypi.org:443"]\nagent_network: true\n',
])
def test_setup_network_is_refused_before_any_pod_or_model_call(tmp_path, autopatch_bin, stub,
                                                               config):
    repo, home, owner = calc_repo(tmp_path, config)
    r = run_fix(autopatch_bin, home, repo, stub, owner)
    assert r.returncode != 0, r.stdout
    assert "cannot run on the kubernetes backend without AUTOPATCH_K8S_EGRESS_ADDRESS" in r.stderr
    assert "remove `network:`" in r.stderr and "AUTOPATCH_SANDBOX_BACKEND=docker" in r.stderr
    assert "PROVEN" not in r.stdout.replace("NOT PROVEN", "")
    assert r.requests == [], "a model call although the sandbox was refused"
    assert k8s_util.stub_containers("autopatch-" + owner) == []


def test_sandbox_run_allow_is_refused_and_creates_nothing(tmp_path, autopatch_bin, stub):
    sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub)
    r = sb.run("true", args=("--allow", "pypi.org:443"), text=True)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "egress allow-list" in lines[0] and "kubernetes backend" in lines[0]
    assert sb.leftovers() == []


def test_offline_setup_is_cached_and_restored_through_exec(tmp_path, autopatch_bin, stub):
    repo, home, owner = calc_repo(tmp_path, OFFLINE_SETUP)
    r1 = run_fix(autopatch_bin, home, repo, stub, owner, script=brief())
    assert r1.returncode == 0, r1.stdout + r1.stderr[-3000:]
    assert "setup ran (" in r1.stdout
    assert "environment cached (key" in r1.stdout  # the archive came back on raw stdout
    assert "network off" not in r1.stdout  # there was never any network to turn off
    assert "PROVEN" in r1.stdout
    assert ".venv" not in (home / "patch.diff").read_text()

    r2 = run_fix(autopatch_bin, home, repo, stub, owner, script=brief())
    assert r2.returncode == 0, r2.stdout + r2.stderr[-3000:]
    assert "environment restored from cache (key" in r2.stdout, r2.stdout  # over v5 stdin
    assert "setup ran (" not in r2.stdout
    assert "PROVEN" in r2.stdout


def test_v4_only_server_cannot_stream_the_setup_products_to_the_tester(tmp_path, autopatch_bin):
    """Every Tester run is a fresh pod filled from the host's snapshot of what setup made,
    streamed into it over exec stdin, which needs v5.channel.k8s.io. A v4-only server (before
    Kubernetes 1.30) cannot take it: the job stops before any model call with the sentence
    that says so, instead of testing in the Builder's pod."""
    stub = k8s_util.K8sStub(tmp_path / "stub", protocols=["v4.channel.k8s.io"])
    try:
        repo, home, owner = calc_repo(tmp_path, OFFLINE_SETUP)
        r1 = run_fix(autopatch_bin, home, repo, stub, owner)
        assert r1.returncode != 0, r1.stdout + r1.stderr[-3000:]
        assert "environment cached (key" in r1.stdout
        assert "needs the v5.channel.k8s.io exec protocol" in r1.stdout, r1.stdout
        assert "0 model calls" in r1.stdout and "PROVEN:" not in r1.stdout.replace("NOT PROVEN:", "")
        # the cache cannot be restored over v4 either: setup runs again, same end
        r2 = run_fix(autopatch_bin, home, repo, stub, owner)
        assert "the cached environment could not be restored" in r2.stdout
        assert "setup ran (" in r2.stdout
        assert r2.returncode != 0 and "0 model calls" in r2.stdout, r2.stdout
    finally:
        stub.close()
