"""Helpers for the sandbox end-to-end tests: a unique owner id per test, `autopatch sandbox`
runs, and a look at what the test left in the (shared) Docker daemon.

Other helpers use the same dockerd at the same time, so everything is scoped by the
autopatch.owner label, and cleanup only ever touches containers carrying this test's owner id.

Every test that uses sandbox_factory runs on each sandbox backend (AP_SANDBOX_BACKENDS,
default "docker,kubernetes"): on "kubernetes" the boxes are pods of the Kubernetes API
stand-in (tests/e2e/k8s_util.py), which runs them as Docker containers, so owned() and
inspect() see their box containers too. Tests of one backend's own behaviour ask
`sb.backend`.
"""
import json
import os
import pathlib
import subprocess
import uuid

import pytest

import k8s_util

IMAGE = os.environ.get("AUTOPATCH_SANDBOX_IMAGE", "autopatch-sandbox:latest")
RUNTIMES = ["runc", "runsc"]
# The CLI that looks at the engine under test: "podman" when DOCKER_HOST points at
# `podman system service` (see docs/sandbox.md, "Podman").
CLI = os.environ.get("AP_CONTAINER_CLI", "docker")
BACKENDS = os.environ.get("AP_SANDBOX_BACKENDS", "docker,kubernetes").split(",")


def docker(*args, check=True, timeout=60):
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def bridge_gateway():
    """The host's address on Docker's default bridge, which its containers reach the host at.
    The network's IPAM config names it, except after some daemon starts (seen on Docker
    20.10 with an existing docker0: the config holds only the subnet); then it is the
    address of the bridge's interface."""
    gw = docker("network", "inspect", "bridge", "-f",
                "{{range .IPAM.Config}}{{.Gateway}}{{end}}").stdout.strip()
    if gw:
        return gw
    dev = docker("network", "inspect", "bridge", "-f",
                 '{{index .Options "com.docker.network.bridge.name"}}').stdout.strip() or "docker0"
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", dev], capture_output=True,
                         text=True, check=True).stdout.split()
    assert "inet" in out, f"no IPv4 address on Docker's bridge {dev}: {out}"
    return out[out.index("inet") + 1].split("/")[0]


def owned(owner, kind="container"):
    """Ids of containers (or networks) labelled with owner, running or not; with the
    Kubernetes stand-in, also the box container of each of the owner's pods."""
    if kind == "container":
        out = docker("ps", "-aq", "--no-trunc", "--filter", f"label=autopatch.owner={owner}")
    else:
        out = docker("network", "ls", "-q", "--filter", f"label=autopatch.owner={owner}")
    ids = [line for line in out.stdout.split() if line]
    if kind == "container":
        ids += k8s_util.stub_containers(f"autopatch-{owner}-", "box")
    return ids


class Sandbox:
    """Runs `autopatch sandbox ...` with an environment of its own (owner id, data dir)."""

    def __init__(self, binary, tmp_path, runtime="runc", extra_env=None, backend="docker",
                 stub=None):
        self.binary = str(pathlib.Path(binary).resolve())
        self.backend = backend
        self.stub = stub
        self.owner = "t" + uuid.uuid4().hex[:12]
        self.tmp = pathlib.Path(tmp_path)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp),
            "AUTOPATCH_OWNER_ID": self.owner,
            "AUTOPATCH_DATA_DIR": str(self.tmp / "data"),
            "AUTOPATCH_SANDBOX_RUNTIME": runtime,
            "AUTOPATCH_SANDBOX_IMAGE": IMAGE,
            "AUTOPATCH_ENV_FILE": str(self.tmp / ".env"),
        }
        (self.tmp / ".env").touch()
        if "DOCKER_HOST" in os.environ:
            self.env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
        if backend == "kubernetes":
            self.env.update(stub.env(stub.kubeconfig(self.tmp / "kubeconfig")))
            if runtime == "runsc":  # gVisor through a RuntimeClass (the stand-in maps it)
                self.env["AUTOPATCH_K8S_RUNTIME_CLASS"] = "gvisor"
        self.env.update(extra_env or {})

    def run(self, *cmd, repo=None, timeout=None, args=(), wall=120, stdin=None, text=False):
        argv = [self.binary, "sandbox", "run", *args]
        if repo is not None:
            argv += ["--repo", str(repo)]
        if timeout is not None:
            argv += ["--timeout", str(timeout)]
        argv += ["--", *cmd]
        return subprocess.run(argv, env=self.env, capture_output=True, timeout=wall,
                              stdin=subprocess.DEVNULL if stdin is None else stdin, text=text,
                              cwd=self.tmp)

    def popen(self, *cmd, args=(), **kw):
        argv = [self.binary, "sandbox", "run", *args, "--", *cmd]
        return subprocess.Popen(argv, env=self.env, cwd=self.tmp, stdin=subprocess.DEVNULL, **kw)

    def reap(self, *args):
        return subprocess.run([self.binary, "sandbox", "reap", *args], env=self.env,
                              capture_output=True, text=True, timeout=120, cwd=self.tmp)

    def leftovers(self):
        left = owned(self.owner) + owned(self.owner, "network")
        if self.stub:
            left += self.stub.owned_objects(self.owner)
        return left

    def cleanup(self):
        if self.stub:
            self.stub.delete_owned(self.owner)
        ids = owned(self.owner)
        if ids:
            docker("rm", "-f", *ids, check=False)
        nets = owned(self.owner, "network")
        if nets:
            docker("network", "rm", *nets, check=False)


@pytest.fixture(scope="session")
def k8s_stub(tmp_path_factory):
    """One Kubernetes API stand-in for the session, started when a test first needs it."""
    stubs = []

    def get():
        if not stubs:
            stubs.append(k8s_util.K8sStub(tmp_path_factory.mktemp("k8s-stub")))
        return stubs[0]

    yield get
    for s in stubs:
        s.close()


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def sandbox_factory(autopatch_bin, tmp_path, backend, k8s_stub):
    made = []

    def make(runtime="runc", **kw):
        sub = tmp_path / f"s{len(made)}"
        sub.mkdir()
        stub = k8s_stub() if backend == "kubernetes" else None
        s = Sandbox(autopatch_bin, sub, runtime, backend=backend, stub=stub, **kw)
        made.append(s)
        return s

    make.backend = backend
    yield make
    for s in made:
        left = s.leftovers()
        s.cleanup()
        assert not left, f"the test left containers/networks behind: {left}"


def inspect(container_id):
    out = docker("inspect", container_id, check=False)
    return json.loads(out.stdout)[0] if out.returncode == 0 else None
