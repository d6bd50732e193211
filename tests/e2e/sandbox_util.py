"""Helpers for the sandbox end-to-end tests: a unique owner id per test, `autopatch sandbox`
runs, and a look at what the test left in the (shared) Docker daemon.

Other helpers use the same dockerd at the same time, so everything is scoped by the
autopatch.owner label, and cleanup only ever touches containers carrying this test's owner id.
"""
import json
import os
import pathlib
import subprocess
import uuid

import pytest

IMAGE = os.environ.get("AUTOPATCH_SANDBOX_IMAGE", "autopatch-sandbox:latest")
RUNTIMES = ["runc", "runsc"]
# The CLI that looks at the engine under test: "podman" when DOCKER_HOST points at
# `podman system service` (see docs/sandbox.md, "Podman").
CLI = os.environ.get("AP_CONTAINER_CLI", "docker")


def docker(*args, check=True, timeout=60):
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def owned(owner, kind="container"):
    """Ids of containers (or networks) labelled with owner, running or not."""
    if kind == "container":
        out = docker("ps", "-aq", "--no-trunc", "--filter", f"label=autopatch.owner={owner}")
    else:
        out = docker("network", "ls", "-q", "--filter", f"label=autopatch.owner={owner}")
    return [line for line in out.stdout.split() if line]


class Sandbox:
    """Runs `autopatch sandbox ...` with an environment of its own (owner id, data dir)."""

    def __init__(self, binary, tmp_path, runtime="runc", extra_env=None):
        self.binary = str(pathlib.Path(binary).resolve())
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
        return owned(self.owner) + owned(self.owner, "network")

    def cleanup(self):
        ids = owned(self.owner)
        if ids:
            docker("rm", "-f", *ids, check=False)
        nets = owned(self.owner, "network")
        if nets:
            docker("network", "rm", *nets, check=False)


@pytest.fixture
def sandbox_factory(autopatch_bin, tmp_path):
    made = []

    def make(runtime="runc", **kw):
        sub = tmp_path / f"s{len(made)}"
        sub.mkdir()
        s = Sandbox(autopatch_bin, sub, runtime, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        left = s.leftovers()
        s.cleanup()
        assert not left, f"the test left containers/networks behind: {left}"


def inspect(container_id):
    out = docker("inspect", container_id, check=False)
    return json.loads(out.stdout)[0] if out.returncode == 0 else None
