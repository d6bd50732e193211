"""The sandbox attack suite: hostile commands run through `autopatch sandbox run` against the
real Docker engine, on runc and on runsc (gVisor). Every test fails if containment breaks.

Limits are lowered per test through the AUTOPATCH_SANDBOX_* settings so the attacks hit them
quickly. Each test uses its own owner id and checks that nothing is left behind.
"""
import ast
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import k8s_util
from sandbox_util import BACKENDS, docker, inspect, owned, sandbox_factory  # noqa: F401

# --- the matrix ----------------------------------------------------------------------------
# Every attack runs on Docker with runc. The other cells run an attack only where its outcome
# can differ there, so the matrix keeps its coverage without multiplying it (19 attacks x 4
# cells were 76 runs; this is 48):
#
# "runsc" (Docker, gVisor): where the kernel enforces the rule, and gVisor's Sentry is that
#   kernel: cgroup limits (pids, memory), tmpfs sizes and RLIMIT_FSIZE, signal delivery and the
#   kills at a deadline, what processes the host sees, the network stack, capabilities and user
#   namespaces, read-only mounts, and isolation between two boxes. Not: the output attacks
#   (the bytes cross the host's Docker stream and our demuxer whichever runtime wrote them),
#   the docker socket and the canary (mounts and environment are the container spec's, which
#   the runtime only obeys), and the lifecycle attacks (kill, remove and labels are host-side
#   API calls, the same for every runtime).
# "kubernetes" (pods of the API stand-in, runc): where autopatch's own Kubernetes code decides
#   the outcome: exec over WebSocket channels (floods, forged frames, endless lines), the
#   inside deadline and rlimits it wraps every command in (timeout, prlimit), deleting the pod
#   at the host deadline and on a signal, the pid-1 reaper and podPidsLimit, reaping by label
#   through the API, the deny-all NetworkPolicy made before each pod, and the credentials that
#   only this backend holds (the canary). Not: the attacks whose defence is one pod field that
#   the stand-in hands to Docker as the Docker backend would (securityContext for privileges,
#   readOnly mounts, no hostPath or service-account token for the socket, limits.memory, one
#   pod per box): test_k8s_stub.py checks each such field of the pod autopatch sends.
# "kubernetes-runsc" (pods under the gvisor RuntimeClass): the cell adds only how the class
#   meets the pod's own defences: the bomb that gVisor's missing pids limit leaves to the memory
#   limit, the host deadline and the pod deletion that must end a gVisor sandbox, and the user
#   namespace branch that proves the class took effect at all.
CELLS = {  # cell: (backend, runtime)
    "docker-runc": ("docker", "runc"), "docker-runsc": ("docker", "runsc"),
    "kubernetes-runc": ("kubernetes", "runc"), "kubernetes-runsc": ("kubernetes", "runsc"),
}
RUNSC, K8S, K8S_RUNSC = "docker-runsc", "kubernetes-runc", "kubernetes-runsc"
ALSO = {  # attack: the cells it runs in besides docker-runc
    "test_fork_bomb_is_contained": {RUNSC, K8S, K8S_RUNSC},
    "test_memory_bomb_is_killed": {RUNSC},
    "test_workspace_and_tmp_are_size_capped": {RUNSC},
    "test_file_size_limit": {RUNSC, K8S},
    "test_binary_flood_is_streamed_intact": {K8S},
    "test_endless_line_without_newlines_ends_at_the_deadline": {K8S},
    "test_forged_frame_header_in_output_is_just_bytes": {K8S},
    "test_sigterm_ignoring_busy_loop_killed_at_deadline": {RUNSC, K8S},
    "test_inside_deadline_lands_before_the_host_grace": {RUNSC, K8S},
    "test_host_deadline_kills_what_escapes_the_inside_one": {RUNSC, K8S, K8S_RUNSC},
    "test_background_process_outlives_its_exec_and_dies_with_the_box": {RUNSC, K8S, K8S_RUNSC},
    "test_no_network_at_all": {RUNSC, K8S},
    "test_no_privileges": {RUNSC, K8S_RUNSC},
    "test_repo_and_root_are_read_only": {RUNSC},
    "test_no_docker_socket_inside": set(),
    "test_canary_secret_appears_nowhere": {K8S},
    "test_sigkill_of_autopatch_then_restart_leaves_nothing": {K8S},
    "test_sigterm_destroys_the_box_first": {K8S},
    "test_one_job_cannot_see_another": {RUNSC},
}



ROOT = pathlib.Path(__file__).resolve().parents[2]
GRACE_MS = 3000  # SBX_KILL_GRACE in sandbox/docker.c: the host deadline is N s + this


def host_procs_of(cid):
    """Host processes whose command line names the container (runc's shim; runsc's sandbox
    and gofer). Inside gVisor the box's own processes never show on the host, these do."""
    out = subprocess.run(["pgrep", "-af", cid], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def probe_held(sb, *args, env=None, timeout=120):
    """Runs tests/sandbox/sbx_probe ARGS; when it stops before destroying the box, checks
    the host, lets it go on, and returns ({op: record}, host processes before, after)."""
    path = (pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build"))
            / "tests/sandbox/sbx_probe").resolve()
    assert path.exists(), f"{path} is missing: build first"
    proc = subprocess.Popen([str(path), *args], env=dict(sb.env, **(env or {})), cwd=sb.tmp,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    recs, before, after = {}, None, None
    try:
        for line in proc.stdout:
            rec = json.loads(line)
            recs[rec["op"]] = rec
            if rec["op"] == "destroying":
                if sb.backend == "kubernetes":  # the pod's box container is what runs
                    # (none when the host killed the box: its pod is deleted at once)
                    rec["container"] = k8s_util.box_container(rec["id"]) or rec["id"]
                before = host_procs_of(rec.get("container", rec["id"]))
                proc.stdin.write("\n")
                proc.stdin.flush()
        assert proc.wait(timeout=timeout) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    cid = recs["destroying"].get("container", recs["destroying"]["id"])
    for _ in range(50):  # the shim / runsc exit a moment after the removal
        after = host_procs_of(cid)
        if not after:
            break
        time.sleep(0.1)
    return recs, before, after


def py(code):
    return ["python3", "-c", code]


# --- resources ---------------------------------------------------------------------------

def test_fork_bomb_is_contained(sandbox_factory, runtime):
    sb = sandbox_factory(runtime, extra_env={"AUTOPATCH_SANDBOX_PIDS": "64",
                                             "AUTOPATCH_SANDBOX_MEMORY": "256m"})
    # Count how many processes one can fork before the kernel says no.
    code = ("import os, time, errno\n"
            "n = 0\n"
            "try:\n"
            "    while n < 300:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(60); os._exit(0)\n"
            "        n += 1\n"
            "    print('unlimited', n, flush=True)\n"
            "except OSError as e:\n"
            "    print('stopped', n, errno.errorcode[e.errno], flush=True)\n")
    if runtime == "runc":
        # The kernel's pids cgroup stops it. On Kubernetes the limit is the kubelet's
        # podPidsLimit (a pod spec has none; docs/kubernetes.md): the stand-in's.
        limit = 64 if sb.backend == "docker" else k8s_util.POD_PIDS_LIMIT
        r = sb.run(*py(code.replace("n < 300", f"n < {limit + 100}")), timeout=30, text=True,
                   wall=90)
        assert "stopped" in r.stdout, (r.stdout, r.stderr)
        assert int(r.stdout.split()[1]) < limit
        assert "EAGAIN" in r.stdout
    # A bomb that never gives up (retries on EAGAIN, each child holds 1 MiB), 5 s deadline.
    # runc: the pids cgroup caps it, the deadline ends it, and the box survives with every
    # bomb process gone (the post-timeout sweep). gVisor's Sentry does not enforce PidsLimit
    # (docs/sandbox.md): the memory limit kills the whole sandbox (137) or the deadline ends
    # it (124); either way within the deadline + the host grace, and the box is gone after.
    recs, before, after = probe_held(sb, "bomb", "5")
    bomb = recs["bomb"]
    assert bomb["rc"] == 0, bomb
    # The bomb started ("bombing"), except when gVisor's memory kill took the whole sandbox
    # before its output left the box: output still in the Sentry's pipes dies with it (seen
    # at 2 s under load). That exit, 137, is then checked below.
    assert bomb["out"] == "bombing" or (runtime == "runsc" and bomb["out"] == "" and
                                        bomb["exit"] == 137), bomb
    if runtime == "runc":
        assert bomb["exit"] == 124 and bomb["timed_out"] is True, bomb
        assert 5000 <= bomb["millis"] < 5000 + GRACE_MS, bomb
        assert recs["after_bomb"]["out"] == "alive", recs["after_bomb"]
    else:
        assert bomb["exit"] in (124, 137), bomb
        assert bomb["millis"] < 5000 + GRACE_MS + 3000, bomb
        if bomb["exit"] == 137:  # the Sentry died: the box refuses further commands
            assert bomb["timed_out"] is False and recs["after_bomb"]["rc"] != 0, recs
    if recs["after_bomb"]["rc"] == 0:  # a box still running has host processes
        assert before, "no host process named the box: the check below would prove nothing"
    assert after == [], after
    assert recs["destroyed"]["containers"] == 0
    # The classic shell bomb (dash refuses `:` as a function name), then a wait so the
    # bombing outlasts the deadline: a loop of builtins, since `sleep` may find no pid left
    # to fork (the cap holding) and end the command early with "Cannot fork". The bomb starts
    # in a subshell: dash forks each element of `b|b&` itself, and a shell whose own second
    # fork meets the cap exits 2 at once ("Cannot fork"), which would end the command early.
    t0 = time.monotonic()
    r = sb.run("sh", "-c", "(b(){ b|b& }; b); while :; do :; done", timeout=3, wall=90)
    assert r.returncode in (124, 137), r.stderr
    assert time.monotonic() - t0 < 3 + 3 + 10
    assert sb.leftovers() == []


def test_memory_bomb_is_killed(sandbox_factory, runtime):
    sb = sandbox_factory(runtime, extra_env={"AUTOPATCH_SANDBOX_MEMORY": "128m"})
    t0 = time.monotonic()
    r = sb.run(*py("b = bytearray(768 << 20)\nb[::4096] = b'x' * len(b[::4096])\n"
                   "print('ALLOCATED')"), timeout=60, text=True)
    assert "ALLOCATED" not in r.stdout
    assert r.returncode in (1, 137), r.stderr  # MemoryError or the OOM killer
    assert time.monotonic() - t0 < 30  # killed by the limit, not by the deadline
    assert sb.leftovers() == []


def test_workspace_and_tmp_are_size_capped(sandbox_factory, runtime):
    sb = sandbox_factory(runtime, extra_env={"AUTOPATCH_SANDBOX_WORKSPACE_SIZE": "16m",
                                             "AUTOPATCH_SANDBOX_TMP_SIZE": "8m",
                                             "AUTOPATCH_SANDBOX_FSIZE": "64m"})
    r = sb.run("sh", "-c",
               "dd if=/dev/zero of=/tmp/workspace/fill bs=1M count=64 2>&1; "
               "echo ws=$(wc -c < /tmp/workspace/fill); "
               "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; "
               "echo tmp=$(wc -c < /tmp/fill); "
               "for p in /fill /usr/fill /etc/fill /var/fill; do "
               "  if echo x > $p; then echo WROTE $p; fi; done 2>&1",
               timeout=60, text=True)
    out = r.stdout
    assert "No space left on device" in out, out
    ws = int(out.split("ws=")[1].split()[0])
    tmp = int(out.split("tmp=")[1].split()[0])
    assert 0 < ws <= 16 << 20
    assert 0 < tmp <= 8 << 20
    assert "WROTE" not in out
    # runc says EROFS; gVisor checks permissions first and says EACCES. Either way: no write.
    assert "Read-only file system" in out or "Permission denied" in out


def test_file_size_limit(sandbox_factory, runtime):
    sb = sandbox_factory(runtime, extra_env={"AUTOPATCH_SANDBOX_FSIZE": "2m"})
    r = sb.run("sh", "-c", "dd if=/dev/zero of=big bs=1M count=8 2>&1; echo size=$(wc -c < big)",
               timeout=30, text=True)
    assert ("File too large" in r.stdout or "File size limit exceeded" in r.stdout
            or "size=2097152" in r.stdout), r.stdout
    assert int(r.stdout.split("size=")[1].split()[0]) <= 2 << 20


# --- output ------------------------------------------------------------------------------

def _count_output(proc):
    n = 0
    while True:
        chunk = proc.stdout.read(1 << 16)
        if not chunk:
            return n
        n += len(chunk)


def test_binary_flood_is_streamed_intact(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    size = 8 << 20
    r = sb.run("sh", "-c", f"head -c {size} /dev/urandom; printf END", timeout=60)
    assert r.returncode == 0
    assert len(r.stdout) == size + 3
    assert r.stdout.endswith(b"END")


def test_endless_line_without_newlines_ends_at_the_deadline(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    proc = sb.popen("sh", "-c", "yes | tr -d '\\n'", args=("--timeout", "3"),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    n = _count_output(proc)
    rc = proc.wait(timeout=60)
    err = proc.stderr.read().decode()
    assert rc == 124, err
    assert n > 1 << 20  # it did flood
    assert "timed out" in err
    assert sb.leftovers() == []


def test_forged_frame_header_in_output_is_just_bytes(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    forged = b"\x01\x00\x00\x00\xff\xff\xff\xff"
    r = sb.run("sh", "-c", "printf '\\001\\000\\000\\000\\377\\377\\377\\377'; echo after; "
               "printf '\\002\\000\\000\\000\\000\\000\\000\\010' >&2; echo err-after >&2",
               timeout=20)
    assert r.returncode == 0
    assert r.stdout == forged + b"after\n"
    assert r.stderr.startswith(b"\x02\x00\x00\x00\x00\x00\x00\x08err-after\n")


# --- time --------------------------------------------------------------------------------

def test_sigterm_ignoring_busy_loop_killed_at_deadline(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    t0 = time.monotonic()
    r = sb.run("sh", "-c", "trap '' TERM INT; echo looping; while :; do :; done",
               timeout=2, text=True)
    took = time.monotonic() - t0
    assert r.returncode == 124
    assert "looping" in r.stdout
    assert took < 15
    assert sb.leftovers() == []


def test_inside_deadline_lands_before_the_host_grace(sandbox_factory, runtime):
    """Three commands with a 2 s deadline in one box (tests/sandbox/sbx_probe deadline)."""
    sb = sandbox_factory(runtime)
    recs, before, after = probe_held(sb, "deadline")
    # 1. Ignores SIGTERM in timeout's process group: the inside `timeout -s KILL` ends it
    # before the host's deadline (2 s + grace), so the box survives and serves the next one.
    inside = recs["inside"]
    assert inside["exit"] == 124 and inside["timed_out"] is True, inside
    assert inside["out"] == "looping"
    assert 2000 <= inside["millis"] < 2000 + GRACE_MS, inside
    assert recs["after_inside"]["rc"] == 0 and recs["after_inside"]["out"] == "alive"
    # 2. A setsid() child escapes timeout's process group and holds stdout: it must not
    # outlive its command's deadline, though the box is kept (sweep) or killed (host).
    esc = recs["escape"]
    assert esc["exit"] == 124 and esc["timed_out"] is True and esc["out"] == "escaped", esc
    assert esc["millis"] < 2000 + GRACE_MS + 2000, esc
    print(f"escape ended after {esc['millis']} ms; box kept: {recs['state']['running']}")
    after_esc = recs["after_escape"]
    assert after_esc["rc"] != 0 or after_esc["out"] == "0", after_esc  # no "sleep 997" left
    assert recs["destroyed"]["containers"] == 0
    # When the escape hit the host deadline (a loaded machine: the stream closes 2 s after
    # the exec's main process, plus the backend's own latency), the box is gone already and
    # has no host process to see; a box still running must show one, or `after` proves nothing.
    if recs["state"]["running"]:
        assert before, "no host process named the box: the check below would prove nothing"
    else:
        assert after_esc["rc"] != 0, recs  # a killed box refuses further commands
    assert after == [], (before, after)


def test_host_deadline_kills_what_escapes_the_inside_one(sandbox_factory, runtime):
    """The command stops its own `timeout` (SIGSTOP) and leaves a setsid() child holding
    stdout: only the host's deadline can end it; it kills the whole box."""
    sb = sandbox_factory(runtime)
    recs, before, after = probe_held(sb, "hostdeadline")
    host = recs["host"]
    assert host["exit"] == 124 and host["timed_out"] is True and host["out"] == "stopped", host
    assert 2000 + GRACE_MS - 50 <= host["millis"] < 2000 + GRACE_MS + 5000, host
    assert recs["after_host"]["rc"] != 0  # the killed box refuses further commands
    assert recs["state"]["running"] == 0
    assert recs["destroyed"]["containers"] == 0
    assert after == [], after


def test_background_process_outlives_its_exec_and_dies_with_the_box(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    recs, before, after = probe_held(sb, "background")
    # exec 1 returned at once, leaving `sleep 9871` running; exec 2 sees it (from /proc,
    # inside the box, which also works under gVisor where the host cannot see it).
    start = recs["start"]
    assert start["rc"] == 0 and start["exit"] == 0 and start["millis"] < 5000, start
    assert int(start["out"]) > 1
    assert recs["find"]["rc"] == 0 and recs["find"]["out"] == "1", recs["find"]
    # destroy: the container and every host process of it are gone.
    assert before, "no host process named the box: the check below would prove nothing"
    assert after == [], after
    assert recs["destroyed"]["containers"] == 0
    assert sb.leftovers() == []
    if runtime == "runc":  # runc's processes are host processes
        host = subprocess.run(["pgrep", "-f", "sleep 9871"], capture_output=True, text=True)
        assert host.stdout.strip() == ""


# --- network -----------------------------------------------------------------------------

def _host_addresses():
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
    addrs = []
    for line in out.stdout.splitlines():
        addr = line.split()[3].split("/")[0]
        if not addr.startswith("127."):
            addrs.append(addr)
    return addrs


@pytest.fixture
def listeners():
    """TCP listeners on the host's loopback and on all addresses; counts connections."""
    socks, hits = [], []

    def serve(s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            hits.append(1)
            c.close()

    ports = {}
    for name, addr in (("loopback", "127.0.0.1"), ("any", "0.0.0.0")):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, 0))
        s.listen(16)
        ports[name] = s.getsockname()[1]
        socks.append(s)
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    yield ports, hits
    for s in socks:
        s.close()


def test_no_network_at_all(sandbox_factory, runtime, listeners):
    ports, hits = listeners
    targets = [("127.0.0.1", ports["loopback"])]
    targets += [(a, ports["any"]) for a in _host_addresses()]
    targets += [("1.1.1.1", 53), ("8.8.8.8", 443), ("169.254.169.254", 80)]
    # The probe itself must be able to succeed: it is checked on the host first.
    probe = ("import socket, sys\n"
             f"targets = {targets!r}\n"
             "for host, port in targets:\n"
             "    try:\n"
             "        socket.create_connection((host, port), timeout=2).close()\n"
             "        print('CONNECTED', host, port)\n"
             "    except OSError as e:\n"
             "        print('failed', host, port, e)\n"
             "try:\n"
             "    print('RESOLVED', socket.getaddrinfo('example.com', 443))\n"
             "except OSError as e:\n"
             "    print('dns failed', e)\n"
             "print('ifaces', open('/proc/net/dev').read().split('\\n')[2:])\n")
    host = subprocess.run(["/usr/bin/python3", "-c",
                           probe.replace(repr(targets), repr(targets[:1]))],
                          capture_output=True, text=True, timeout=30)
    assert "CONNECTED 127.0.0.1" in host.stdout  # the listener really answers
    before = len(hits)
    r = sb_run = sandbox_factory(runtime).run(*py(probe), timeout=60, text=True)
    assert r.returncode == 0, r.stderr
    assert "CONNECTED" not in r.stdout, r.stdout
    assert "RESOLVED" not in r.stdout
    assert r.stdout.count("failed") == len(targets) + 1
    assert len(hits) == before
    # Only the loopback interface exists (runc and gVisor alike).
    ifaces = r.stdout.split("ifaces")[1]
    assert "eth" not in ifaces
    del sb_run
    # localhost resolves (a hosts file), and on Docker the host's name servers and search
    # domains stay out of the box: its resolv.conf names only the loopback. (A pod's is the
    # cluster's, as in every pod; its deny-all policy cuts DNS.)
    r = sandbox_factory(runtime).run(*py(
        "import socket\n"
        "print('LOCAL', socket.gethostbyname('localhost'))\n"
        "print('CONF', repr(open('/etc/resolv.conf').read()))\n"), timeout=60, text=True)
    assert r.returncode == 0, r.stderr
    assert "LOCAL 127.0.0.1" in r.stdout, r.stdout
    conf = r.stdout.split("CONF ", 1)[1]
    if sandbox_factory.backend == "docker":
        servers = re.findall(r"nameserver\s+(\S+)", ast.literal_eval(conf))
        assert servers == ["127.0.0.1"], conf
        assert "search" not in ast.literal_eval(conf), conf


# --- privileges --------------------------------------------------------------------------

def test_no_privileges(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print('uid', os.getuid(), os.geteuid(), os.getgid())\n"
            "print('nnp', libc.prctl(39, 0, 0, 0, 0))\n"  # PR_GET_NO_NEW_PRIVS
            "st = open('/proc/self/status').read()\n"
            "for line in st.splitlines():\n"
            "    if line.startswith(('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs')):\n"
            "        print(line.replace('\\t', ' '))\n"
            "rc = libc.mount(b'x', b'/tmp/workspace', b'tmpfs', 0, None)\n"
            "print('mount', rc, ctypes.get_errno())\n"
            "rc = libc.unshare(0x10000000)\n"  # CLONE_NEWUSER
            "print('unshare', rc)\n")
    r = sb.run(*py(code), timeout=30, text=True)
    out = r.stdout
    assert r.returncode == 0, r.stderr
    uid = out.split("uid ")[1].split()
    assert uid[0] != "0" and uid[1] != "0" and uid[2] != "0"
    assert "nnp 1" in out
    assert "CapEff: 0000000000000000" in out
    if runtime == "runc":  # gVisor does not print the NoNewPrivs line; prctl above covers it
        assert "NoNewPrivs: 1" in out
    assert "mount -1" in out
    if runtime == "runc":
        assert "unshare -1" in out
    else:
        # gVisor implements user namespaces inside its own kernel: unshare works there but
        # grants nothing outside it. Prove that: "root" in the new namespace still cannot
        # write the read-only /repo or the root filesystem.
        r = sb.run("sh", "-c", "unshare -Ur sh -c 'id -u; echo x > /repo/f; echo x > /etc/x;"
                   " echo x > /usr/x' 2>&1; ls /repo", repo=sb.tmp, timeout=30, text=True)
        assert r.stdout.startswith("0\n")
        denied = r.stdout.count("Read-only file system") + r.stdout.count("Permission denied")
        assert denied == 3, r.stdout
        assert not (sb.tmp / "f").exists()
    # Setuid-root binaries gain nothing (no-new-privileges): each must fail.
    r = sb.run("sh", "-c", "unshare -r true; echo rc=$?; chfn -f x sandbox </dev/null; echo rc=$?; "
               "gpasswd -r sandbox </dev/null; echo rc=$?; su -c id root </dev/null; echo rc=$?; "
               "cat /etc/shadow; echo rc=$?", timeout=30, text=True)
    rcs = [line for line in r.stdout.splitlines() if line.startswith("rc=")]
    if runtime != "runc":
        rcs = rcs[1:]  # unshare: see above
    assert len(rcs) >= 4 and all(x != "rc=0" for x in rcs), (r.stdout, r.stderr)
    assert "uid=0" not in r.stdout


def test_repo_and_root_are_read_only(sandbox_factory, runtime, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "f").write_text("orig\n")
    sb = sandbox_factory(runtime)
    r = sb.run("sh", "-c", "for p in /repo/f /repo/new /etc/passwd /usr/bin/python3; do "
               "if (echo x >> $p) 2>/dev/null; then echo WROTE $p; fi; done; "
               "rm -f /repo/f 2>/dev/null && echo REMOVED; "
               "cat /repo/f", repo=repo, timeout=30, text=True)
    assert "WROTE" not in r.stdout and "REMOVED" not in r.stdout
    assert "orig" in r.stdout
    assert (repo / "f").read_text() == "orig\n"
    assert not (repo / "new").exists()


def test_no_docker_socket_inside(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    r = sb.run("sh", "-c", "for p in /var/run/docker.sock /run/docker.sock "
               "/run/containerd/containerd.sock /var/run/docker /run/podman; do "
               "[ -e $p ] && echo PRESENT $p; done; env; echo SOCKETS; "
               "find / -xdev -type s 2>/dev/null; echo MOUNTS; cat /proc/mounts",
               timeout=60, text=True)
    assert r.returncode == 0, r.stderr
    assert "PRESENT" not in r.stdout
    env, rest = r.stdout.split("SOCKETS")
    sockets, mounts = rest.split("MOUNTS")
    assert "HOME=/tmp/workspace" in env and "DOCKER" not in env
    assert sockets.strip() == ""
    assert ".sock" not in mounts


def test_canary_secret_appears_nowhere(sandbox_factory, runtime):
    canary_env = "ghs_" + "Q" * 20 + "canaryENV" + "7" * 7
    canary_file = "canary-dotenv-" + os.urandom(6).hex()
    sb = sandbox_factory(runtime, extra_env={"AUTOPATCH_LLM_API_KEY": canary_env,
                                             "CANARY_SECRET": canary_env})
    (sb.tmp / ".env").write_text(f"WEBHOOK_SECRET={canary_file}\n")
    proc = sb.popen("sh", "-c",
                    "cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; env; "
                    "grep -rs --binary-files=text -l -e canary / --exclude-dir=proc "
                    "--exclude-dir=sys --exclude-dir=usr --exclude-dir=var/lib; "
                    "echo DONE; sleep 3",
                    args=("--timeout", "120"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # While it runs, look at the container from the host side too.
    cfg = None
    for _ in range(100):
        ids = owned(sb.owner)
        if ids:
            cfg = inspect(ids[0])
            if cfg:
                break
        time.sleep(0.1)
    out, err = proc.communicate(timeout=180)
    out = out.decode(errors="replace")
    assert proc.returncode == 0, err
    assert "DONE" in out and "HOME=/tmp/workspace" in out  # the probe ran
    assert canary_env not in out and canary_file not in out
    assert "canary" not in out.lower().split("done")[0].replace("canary /", "")
    assert cfg is not None
    text = str(cfg)
    assert canary_env not in text and canary_file not in text


# --- lifecycle ---------------------------------------------------------------------------

def _wait_for_container(sb, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ids = owned(sb.owner)
        if ids and (inspect(ids[0]) or {}).get("State", {}).get("Running"):
            return ids[0]
        time.sleep(0.1)
    raise AssertionError("no running container appeared")


def test_sigkill_of_autopatch_then_restart_leaves_nothing(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    proc = sb.popen("sleep", "300", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cid = _wait_for_container(sb)
    time.sleep(0.5)  # inside the exec
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert cid in owned(sb.owner)  # the crash did leave it
    r = sb.run("true", timeout=20)  # restart: reaps what the dead process left
    assert r.returncode == 0
    assert sb.leftovers() == []


def test_sigterm_destroys_the_box_first(sandbox_factory, runtime):
    sb = sandbox_factory(runtime)
    proc = sb.popen("sleep", "300", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_container(sb)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
    assert rc == 128 + signal.SIGTERM
    assert sb.leftovers() == []


def test_one_job_cannot_see_another(sandbox_factory, runtime, tmp_path):
    a = sandbox_factory(runtime)
    b = sandbox_factory(runtime)
    marker = "jobA-" + os.urandom(4).hex()
    proc = a.popen("sh", "-c", f"echo secret > /tmp/workspace/{marker}; "
                   f"echo secret > /tmp/{marker}-tmp; exec sleep 4242",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_container(a)
    time.sleep(1.0)
    r = b.run("sh", "-c", "find / -xdev -name 'jobA-*' 2>/dev/null; "
              "ls /tmp/workspace /tmp; ps -eo args", timeout=60, text=True)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 128 + signal.SIGINT
    assert r.returncode == 0, r.stderr
    assert marker not in r.stdout
    assert "sleep 4242" not in r.stdout  # A's processes are invisible
    assert a.leftovers() == [] and b.leftovers() == []


def _apply_the_matrix():
    """Parametrizes each attack over its cells (a direct parametrization of backend overrides
    sandbox_util's fixture); AP_SANDBOX_BACKENDS still narrows the backends. An attack missing
    from ALSO fails collection: its author must say where it runs."""
    tests = {n for n in globals() if n.startswith("test_")}
    assert tests == set(ALSO), f"say in ALSO where these run: {sorted(tests ^ set(ALSO))}"
    for name, extra in ALSO.items():
        cells = [c for c in CELLS if (c == "docker-runc" or c in extra)
                 and CELLS[c][0] in BACKENDS]
        globals()[name] = pytest.mark.parametrize(
            ("backend", "runtime"), [CELLS[c] for c in cells], ids=cells)(globals()[name])


_apply_the_matrix()
