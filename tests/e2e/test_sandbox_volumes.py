"""Images that declare a VOLUME, against the real Docker engine (issue 11, item 5).

Docker gives every VOLUME of an image an anonymous volume on host disk: writable, uncapped,
inside an otherwise read-only, size-capped box. The backend covers each VOLUME with a tmpfs
of AUTOPATCH_SANDBOX_VOLUME_SIZE owned by the box user instead, or refuses the image with a
sentence. The test images are the sandbox image with a VOLUME added by `docker commit
--change` (no registry, no base image needed), removed at the end.
"""
import json
import signal
import subprocess
import time
import uuid

import pytest

from sandbox_util import IMAGE, RUNTIMES, docker, inspect, owned, sandbox_factory  # noqa: F401


@pytest.fixture
def backend():
    """Image VOLUMEs become Docker volumes only on the Docker backend; on Kubernetes the
    container runtime keeps them in the container's ephemeral storage, which the pod's
    ephemeral-storage limit caps (docs/kubernetes.md)."""
    return "docker"

VOLUME_SIZE = 8 << 20

FILL = r"""
import errno, json, os
st = os.stat("/data")
vfs = os.statvfs("/data")
fd = os.open("/data/fill", os.O_WRONLY | os.O_CREAT, 0o644)
n, err = 0, None
try:
    while n < 64 << 20:
        n += os.write(fd, b"\0" * 65536)
except OSError as e:
    err = errno.errorcode[e.errno]
tmp = os.statvfs("/tmp")
print(json.dumps({"uid": st.st_uid, "gid": st.st_gid, "mode": oct(st.st_mode & 0o777),
                  "size": vfs.f_blocks * vfs.f_frsize, "written": n, "err": err,
                  "tmp_size": tmp.f_blocks * tmp.f_frsize,
                  "mountinfo": [l for l in open("/proc/self/mountinfo") if " /data " in l]}))
"""


@pytest.fixture(scope="module")
def images():
    """Tag -> image: the sandbox image plus one VOLUME declaration each."""
    tag = "autopatch-test-volume-" + uuid.uuid4().hex[:10]
    volumes = {
        "data": '["/data"]',
        "tmp": '["/tmp", "/data"]',
        "root": '["/"]',
        "workspace": '["/data", "/tmp/workspace/cache"]',
        "repo": '["/repo"]',
        "proc": '["/proc/sys"]',
    }
    made = {}
    cid = docker("create", IMAGE, "true").stdout.strip()
    try:
        for name, spec in volumes.items():
            ref = f"{tag}:{name}"
            docker("commit", "--change", f"VOLUME {spec}", "--change",
                   "LABEL autopatch.test=volumes", cid, ref)
            made[name] = ref
        declared = json.loads(docker("image", "inspect", made["data"]).stdout)[0]
        assert declared["Config"]["Volumes"] == {"/data": {}}
        yield made
    finally:
        docker("rm", "-f", cid, check=False)
        if made:
            docker("rmi", *made.values(), check=False)


def running_box(sb, timeout=60):
    """docker inspect of the test's one box once it runs."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ids = owned(sb.owner)
        info = inspect(ids[0]) if ids else None
        if info and info["State"]["Running"]:
            return info
        time.sleep(0.1)
    raise AssertionError("no running box appeared")


def settings(**extra):
    return {"AUTOPATCH_SANDBOX_VOLUME_SIZE": str(VOLUME_SIZE), **extra}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_volume_is_a_capped_tmpfs_owned_by_the_box_user(sandbox_factory, images, runtime):
    sb = sandbox_factory(runtime, extra_env=settings())
    r = sb.run("python3", "-c", FILL, args=("--image", images["data"]), text=True, wall=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["uid"], got["gid"]) == (10001, 10001)
    assert got["mode"] == "0o755"
    assert got["err"] == "ENOSPC", got          # writing past the cap fails ...
    assert 0 < got["written"] <= VOLUME_SIZE, got  # ... at the cap, not at host disk
    assert got["size"] == VOLUME_SIZE, got
    if runtime == "runc":  # gVisor's mountinfo lists its own mounts differently
        assert len(got["mountinfo"]) == 1, got
        line = got["mountinfo"][0]
        assert " - tmpfs " in line and "size=8192k" in line, line
        assert "noexec" in line and "nosuid" in line and "nodev" in line, line


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_box_of_a_volume_image_has_no_volume_mount(sandbox_factory, images, runtime):
    """`docker inspect` of the running box: no volume (anonymous or named) at all, the VOLUME
    path is a tmpfs, and the box runs exactly the image that was inspected (by id)."""
    sb = sandbox_factory(runtime, extra_env=settings())
    proc = sb.popen("sleep", "300", args=("--image", images["data"]), stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE)
    try:
        info = running_box(sb)
        assert [m for m in info["Mounts"] if m["Type"] != "bind"] == [], info["Mounts"]
        assert [m["Destination"] for m in info["Mounts"]] in ([], ["/repo"]), info["Mounts"]
        assert "size=%d" % VOLUME_SIZE in info["HostConfig"]["Tmpfs"]["/data"]
        assert "uid=10001,gid=10001" in info["HostConfig"]["Tmpfs"]["/data"]
        image_id = json.loads(docker("image", "inspect", images["data"]).stdout)[0]["Id"]
        assert info["Image"] == image_id
        assert info["Config"]["Image"] == image_id
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert sb.leftovers() == []


def test_volume_at_tmp_is_the_boxes_capped_tmp(sandbox_factory, images):
    sb = sandbox_factory(extra_env=settings(AUTOPATCH_SANDBOX_TMP_SIZE="16m"))
    r = sb.run("python3", "-c", FILL, args=("--image", images["tmp"]), text=True, wall=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["tmp_size"] == 16 << 20
    assert got["err"] == "ENOSPC" and got["written"] <= VOLUME_SIZE


@pytest.mark.parametrize("name, why", [
    ("root", "declares VOLUME /, which a box cannot have: a tmpfs at / would replace the "
             "box's whole read-only root filesystem"),
    ("workspace", "declares VOLUME /tmp/workspace/cache, which a box cannot have: it would "
                  "cover or hide the workspace at /tmp/workspace"),
    ("repo", "declares VOLUME /repo, which a box cannot have: it would cover or hide the "
             "read-only repository at /repo"),
    ("proc", "declares VOLUME /proc/sys, which a box cannot have: it is inside a kernel or "
             "device filesystem of the box"),
])
def test_volume_that_cannot_be_covered_refuses_the_image(sandbox_factory, images, name, why):
    sb = sandbox_factory(extra_env=settings())
    r = sb.run("true", args=("--image", images[name]), text=True)
    assert r.returncode == 125, (r.stdout, r.stderr)
    assert f"the sandbox image {images[name]} {why}" in r.stderr
    assert "rebuild the image without it" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert owned(sb.owner) == []  # refused before anything was created
