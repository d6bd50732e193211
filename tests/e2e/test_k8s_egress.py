"""The egress allow-list on the Kubernetes backend (docs/kubernetes.md, "The setup phase on
Kubernetes"), against the API stand-in, whose NetworkPolicy enforcement is real: a pod whose
policies allow egress runs on an Internal Docker network with an iptables chain on the host's
INPUT for its bridge (ACCEPT per allowed ipBlock and port, then DROP), rewritten on every policy
change.

The proxy is autopatch's own (autopatch-egress-proxy), a child of the autopatch process,
listening on AUTOPATCH_K8S_EGRESS_ADDRESS (here the host's address on Docker's default bridge)
and serving only the box pod's IP. The package server is a container on the default bridge
(the proxy, on the host, reaches it; AUTOPATCH_EGRESS_ALLOW_NETS opens exactly its address).
Names are resolved by the proxy: autopatch runs in a mount namespace of its own whose
/etc/hosts names the package server (mirror), an unlisted host (other, the same address), a
private address (private) and the metadata server (metadata). Needs root (unshare, iptables).
"""
import json
import os
import pathlib
import socket
import subprocess
import threading
import uuid

import pytest

import k8s_util
import test_k8s_environments
from agents_util import CALC, brief, call, make_calc_repo, new_owner, step
from sandbox_util import Sandbox, bridge_gateway
from test_egress import BOX_NET
from test_environments import HELPER_TEST, build_wheel, commit_all, docker, wait_http

MIRROR = "mirror.autopatch.test:8080"
PY_IMAGE = "autopatch-sandbox:python"


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    """The package server, a hosts file and a wrapper that runs autopatch with it."""
    if os.geteuid() != 0:
        pytest.fail("the kubernetes egress tests need root (unshare, iptables)")
    tmp = tmp_path_factory.mktemp("k8segress")
    simple = tmp / "pypi" / "simple" / "aphelper"
    simple.mkdir(parents=True)
    wheel = build_wheel("aphelper", "1.0", "def double(x):\n    return 2 * x\n")
    wname = "aphelper-1.0-py3-none-any.whl"
    (simple / wname).write_bytes(wheel)
    (simple / "index.html").write_text(f'<html><body><a href="{wname}">{wname}</a></body></html>\n')
    for p in [tmp, *(tmp / "pypi").rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    name = "apk8segress-" + uuid.uuid4().hex[:10]
    docker("run", "-d", "--name", name, "--label", "autopatch-test=k8s-egress",
           "-v", f"{tmp / 'pypi'}:/srv:ro", PY_IMAGE,
           "python3", "-u", "-m", "http.server", "8080", "--directory", "/srv")
    try:
        ip = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        gw = bridge_gateway()
        wait_http(f"http://{ip}:8080/simple/")
        hosts = tmp / "hosts"
        hosts.write_text(f"127.0.0.1 localhost\n{ip} mirror.autopatch.test other.autopatch.test\n"
                         "10.213.7.9 private.autopatch.test\n"
                         "169.254.169.254 metadata.autopatch.test\n")
        real = pathlib.Path(os.environ.get("AP_BUILD_DIR", k8s_util.ROOT / "build")) / "autopatch"
        wrapper = tmp / "autopatch"
        wrapper.write_text("#!/bin/sh\nexec unshare -m sh -c "
                           "'mount --bind \"$0\" /etc/hosts && exec \"$@\"' "
                           f"{hosts} {real} \"$@\"\n")
        wrapper.chmod(0o755)
        yield {"mirror": name, "ip": ip, "gw": gw, "bin": wrapper,
               "env": {"AUTOPATCH_K8S_EGRESS_ADDRESS": gw,
                       "AUTOPATCH_EGRESS_ALLOW_NETS": f"{ip}/32"}}
    finally:
        docker("rm", "-f", name, check=False)


def access_count(container, needle):
    logs = docker("logs", container, check=False)
    return (logs.stdout + logs.stderr).count(needle)


@pytest.fixture
def stub(tmp_path):
    s = k8s_util.K8sStub(tmp_path / "stub")
    yield s
    s.close()


# Runs in the box: everything it must and must not reach, as one JSON object.
PROBE = r"""
import concurrent.futures, json, os, socket, sys, urllib.error, urllib.request
gw, mirror_ip, host_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
proxy = os.environ["HTTP_PROXY"]
ph, pp = proxy[len("http://"):].rsplit(":", 1)

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return [r.status, r.read().decode()[:200]]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()[:200]]
    except Exception as e:
        return [0, repr(e)]

""" + BOX_NET + r"""

gateway = None
with open("/proc/net/route") as f:
    for line in f.readlines()[1:]:
        p = line.split()
        if p[1] == "00000000":
            gateway = socket.inet_ntoa(int(p[2], 16).to_bytes(4, "little"))
# Every probe at once: the dropped ones each wait out their own timeout, side by side.
probes = {
    "mirror": (get, "http://mirror.autopatch.test:8080/simple/aphelper/"),
    "other": (get, "http://other.autopatch.test:8080/simple/aphelper/"),
    "private": (get, "http://private.autopatch.test:8080/"),
    "metadata": (get, "http://metadata.autopatch.test/latest/meta-data/"),
    "metadata_literal": (get, "http://169.254.169.254/latest/meta-data/"),
    "direct_mirror": (tcp, mirror_ip, 8080),
    "direct_other_port": (tcp, ph, host_port),
    "direct_gateway": ((tcp, gateway, host_port) if gateway else (lambda: "no gateway",)),
    "direct_metadata": (tcp, "169.254.169.254", 80),
    "dns": (dns, "mirror.autopatch.test"),
}
with concurrent.futures.ThreadPoolExecutor(len(probes)) as pool:
    futures = {k: pool.submit(*v) for k, v in probes.items()}
print(json.dumps(dict({"proxy": proxy}, **{k: f.result() for k, f in futures.items()})))
"""


@pytest.fixture
def host_listener():
    """A real server on the host's 0.0.0.0: the box must not reach it on any host address."""
    srv = socket.socket()
    srv.bind(("0.0.0.0", 0))
    srv.listen(16)
    hits = []

    def serve():
        while True:
            try:
                c, a = srv.accept()
            except OSError:
                return
            hits.append(a)
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1], hits
    srv.close()


def test_allow_list_through_the_proxy_and_nothing_else(tmp_path, stub, net, host_listener):
    port, hits = host_listener
    # The listener answers on the very address the proxy listens on (from the host).
    socket.create_connection((net["gw"], port), timeout=3).close()
    hits.clear()
    sb = Sandbox(net["bin"], tmp_path, backend="kubernetes", stub=stub, extra_env=net["env"])
    before = access_count(net["mirror"], "GET /simple/aphelper/ HTTP")
    r = sb.run("python3", "-c", PROBE, net["gw"], net["ip"], str(port), text=True,
               args=("--allow", MIRROR, "--allow", "private.autopatch.test:8080",
                     "--allow", "metadata.autopatch.test:80"))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["proxy"].startswith(f"http://{net['gw']}:"), out
    # The allowed host, through the proxy, by a name only the proxy resolves.
    assert out["mirror"][0] == 200 and "aphelper-1.0" in out["mirror"][1], out
    assert access_count(net["mirror"], "GET /simple/aphelper/ HTTP") == before + 1
    # A host not on the list (the very same address): refused by the proxy, and logged.
    assert out["other"][0] == 403 and "autopatch egress" in out["other"][1], out
    # Listed names that resolve to a private or the metadata address; an IP literal.
    assert out["private"][0] == 403, out
    assert out["metadata"][0] == 403, out
    assert out["metadata_literal"][0] == 403, out
    # Nothing but the proxy's port: not the mirror directly, not a listening port of the
    # proxy's address or of the pod network's gateway (dropped: a timeout, not a refusal), not
    # the metadata server; no DNS.
    for k in ("direct_mirror", "direct_other_port", "direct_gateway", "direct_metadata"):
        assert out[k].startswith("failed") or out[k] == "no gateway", (k, out)
    assert "timed out" in out["direct_other_port"] and "timed out" in out["direct_gateway"], out
    # (other programs on this host may connect from the host's own addresses)
    own = set(subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split())
    assert [h for h in hits if h[0] not in own | {"127.0.0.1"}] == [], hits
    assert out["dns"].startswith("failed"), out
    # The denial log names each refusal.
    denied = [l for l in r.stderr.splitlines() if "egress denied (job " in l]
    assert any("other.autopatch.test:8080" in l for l in denied), denied
    assert any("private.autopatch.test:8080" in l for l in denied), denied
    assert any("metadata.autopatch.test" in l for l in denied), denied
    assert any("169.254.169.254" in l for l in denied), denied
    assert sb.leftovers() == []
    assert stub.owned_objects(sb.env["AUTOPATCH_OWNER_ID"]) == []


def test_without_the_egress_address_an_allow_list_is_still_refused(tmp_path, stub):
    sb = Sandbox(k8s_util.ROOT / "build" / "autopatch" if not os.environ.get("AP_BUILD_DIR")
                 else pathlib.Path(os.environ["AP_BUILD_DIR"]) / "autopatch",
                 tmp_path, backend="kubernetes", stub=stub)
    r = sb.run("true", args=("--allow", MIRROR), text=True)
    assert r.returncode != 0
    assert "without AUTOPATCH_K8S_EGRESS_ADDRESS" in r.stderr, r.stderr
    assert sb.leftovers() == []


# ---- the setup phase of a job ----

PY_SETUP = ("pip install --user --break-system-packages --no-cache-dir --index-url "
            f"http://{MIRROR}/simple/ --trusted-host mirror.autopatch.test -r requirements.txt")
PY_CONFIG = f"""\
setup:
  - {PY_SETUP}
  - python3 -c "import urllib.request as u; u.urlopen('http://other.autopatch.test:8080/', timeout=10)" || true
network: ["{MIRROR}"]
test: python3 -m pytest -q
"""
# The Builder tries the network in the agent phase (the proxy's address from its variables).
NET_PROBE = ("python3 -c \"import os, urllib.request as u; "
             f"u.urlopen('http://{MIRROR}/simple/aphelper/', timeout=8)\"")


def run_fix(bin_, home, repo, stub, net, script):
    return test_k8s_environments.run_fix(bin_, home, repo, stub, new_owner(), env=net["env"],
                                         script=script)


def py_job(tmp_path):
    repo = make_calc_repo(tmp_path, {".github/autopatch.yml": PY_CONFIG,
                                     "requirements.txt": "aphelper==1.0\n",
                                     "tests/test_helper.py": HELPER_TEST,
                                     "ISSUE.md": (CALC / "ISSUE.md").read_text()})
    commit_all(repo, "issue")
    home = tmp_path / "home"
    home.mkdir()
    s = brief()
    s["builder"].insert(1, step(call("run", command=NET_PROBE)))
    return repo, home, s


def builder_results(requests):
    import agents_util
    return [t for req in requests if req["role"] == "builder" for t in agents_util.tool_results(req)]


def test_setup_installs_through_the_proxy_then_the_policy_cuts_the_agent_off(tmp_path, stub, net):
    repo, home, script = py_job(tmp_path)
    before = access_count(net["mirror"], "GET /simple/aphelper/ HTTP")
    r = run_fix(net["bin"], home, repo, stub, net, script)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "setup ran (" in r.stdout
    assert "network off: the egress allow-list ended with setup" in r.stdout
    assert "PROVEN" in r.stdout  # the wheel from the mirror is installed and imported
    assert access_count(net["mirror"], "GET /simple/aphelper/ HTTP") == before + 1
    # The unlisted host during setup: refused by the proxy and reported with its phase.
    blocked = r.stdout.split("BLOCKED network connections", 1)[1]
    assert "other.autopatch.test:8080, 1 time, during setup by" in blocked, blocked
    # The agent phase: the allow policy is gone, so the CNI drops the packets (a timeout, not
    # the proxy's 403), and nothing reached the mirror.
    probe = sorted({t for t in builder_results(r.requests) if "urllib" in t})
    assert len(probe) == 1 and "timed out" in probe[0] and "403" not in probe[0], probe
    assert "during the agent phase" not in blocked


def test_a_cni_that_keeps_the_policy_still_meets_a_locked_proxy(tmp_path, net):
    stub = k8s_util.K8sStub(tmp_path / "stub", extra=("--cni-ignores-policy-deletes",))
    try:
        repo, home, script = py_job(tmp_path)
        before = access_count(net["mirror"], "GET /simple/aphelper/ HTTP")
        r = run_fix(net["bin"], home, repo, stub, net, script)
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        assert "PROVEN" in r.stdout
        assert access_count(net["mirror"], "GET /simple/aphelper/ HTTP") == before + 1
        blocked = r.stdout.split("BLOCKED network connections", 1)[1]
        assert f"{MIRROR}, 1 time, during the agent phase by `{NET_PROBE}`" in blocked, blocked
        probe = sorted({t for t in builder_results(r.requests) if "urllib" in t})
        assert len(probe) == 1 and "HTTP Error 403" in probe[0], probe
    finally:
        stub.close()
