"""The egress allow-list against the real Docker engine.

A "mirror" stand-in is an HTTP server *container* on the proxy's outer network (a host
process on loopback or another host address cannot be reached from an Internal network by
design), named mirror.autopatch.test by a network alias. A decoy container answers as
other.autopatch.test and private.autopatch.test. egress-e2e-driver (tests/sandbox/) brings up
the job's network + proxy through sandbox/egress.c; a hardened sandbox container on that
network then probes, in one exec, everything the sandbox must and must not reach.
"""
import json
import os
import pathlib
import socket
import subprocess
import time
import uuid

import pytest

IMAGE = os.environ.get("AUTOPATCH_SANDBOX_IMAGE", "autopatch-sandbox:latest")
ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build"))
DRIVER = BUILD / "tests" / "sandbox" / "egress-e2e-driver"
PROXY_BIN = BUILD / "sandbox" / "autopatch-egress-proxy"

SERVER = r"""
import http.server, socketserver, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("mirror-ok %s host=%s\n" % (self.path, self.headers.get("Host"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
for port in (8080, 8081):
    threading.Thread(target=S(("0.0.0.0", port), H).serve_forever).start()
# 8443 stands in for a TLS server: it reads one TLS record (the ClientHello) and answers with
# its length and SHA-256, so the probe can tell it arrived unchanged.
import hashlib
class T(socketserver.BaseRequestHandler):
    def handle(self):
        buf = b""
        while len(buf) < 5 or len(buf) < 5 + int.from_bytes(buf[3:5], "big"):
            d = self.request.recv(65536)
            if not d:
                break
            buf += d
        self.request.sendall(b"hello-ok %d %s" % (len(buf), hashlib.sha256(buf).hexdigest().encode()))
class TS(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
threading.Thread(target=TS(("0.0.0.0", 8443), T).serve_forever).start()
"""

# Python for probes that run in the box (needs socket): a direct TCP connection and a name
# lookup, each reported as a string the tests compare.
BOX_NET = r"""
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=4).close()
        return "connected"
    except OSError as e:
        return "failed: %s" % e

def dns(name):
    try:
        return "resolved: %s" % socket.getaddrinfo(name, 80)[0][4][0]
    except OSError as e:
        return "failed: %s" % e
"""

# Runs inside the sandbox. argv: mirror ip, then addresses that must be unreachable directly.
PROBE = r"""
import concurrent.futures, hashlib, json, os, socket, ssl, sys, urllib.error, urllib.request
mirror_ip, direct = sys.argv[1], sys.argv[2:]
proxy = os.environ["HTTP_PROXY"]
ph, pp = proxy[len("http://"):].rsplit(":", 1)
pp = int(pp)

def read_all(s, buf=b""):
    while True:
        try:
            d = s.recv(65536)
        except OSError:
            break
        if not d:
            break
        buf += d
    return buf

def split(buf):
    head, _, body = buf.partition(b"\r\n\r\n")
    parts = head.split()
    return [int(parts[1]) if len(parts) > 1 else 0, body.decode(errors="replace")]

def http_get(url):
    s = socket.create_connection((ph, pp), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: evil.example\r\n\r\n" % url).encode())
    return split(read_all(s))

def client_hello(sni):
    # the first flight of Python's TLS client naming sni (what pip or urllib send)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    out = ssl.MemoryBIO()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()

HELLO = client_hello("mirror.autopatch.test")

def tunnel(target, payload=b"GET /tunnel HTTP/1.0\r\nHost: mirror.autopatch.test\r\n\r\n"):
    s = socket.create_connection((ph, pp), timeout=10)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    status, rest = split(buf)
    if status == 200:
        s.sendall(payload)
    rest = read_all(s, rest.encode()).decode(errors="replace")
    return [status, rest]

def env_get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]

""" + BOX_NET + r"""

decimal = str(int.from_bytes(socket.inet_aton(mirror_ip), "big"))
# Docker still installs a default route on an Internal network: its gateway must not answer.
with open("/proc/net/route") as f:
    for line in f.readlines()[1:]:
        if line.split()[1] == "00000000":
            direct.append(socket.inet_ntoa(int(line.split()[2], 16).to_bytes(4, "little")))
targets = [(ip, int(port)) for ip in [mirror_ip] + direct
           for port in ("8080", "80", os.environ.get("HOST_PORT", "80"))]
with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
    direct_results = dict(zip(["%s:%d" % t for t in targets],
                              pool.map(lambda t: tcp(*t), targets)))
print(json.dumps({
    "env_get": env_get("http://mirror.autopatch.test:8080/env"),
    "http_allowed": http_get("http://mirror.autopatch.test:8080/pkg?x=1"),
    "connect_allowed": tunnel("mirror.autopatch.test:8443", HELLO),
    "hello_sent": "hello-ok %d %s" % (len(HELLO), hashlib.sha256(HELLO).hexdigest()),
    # the allowed address, another name in the ClientHello: domain fronting
    "connect_fronted": tunnel("mirror.autopatch.test:8443",
                              client_hello("other.autopatch.test")),
    # not TLS at all, on a port that is not 443 either
    "connect_not_tls": tunnel("mirror.autopatch.test:8080"),
    "not_listed": tunnel("other.autopatch.test:8080"),
    "not_listed_http": http_get("http://other.autopatch.test:8080/"),
    "wrong_port": tunnel("mirror.autopatch.test:8081"),
    "ip_literal": tunnel("%s:8080" % mirror_ip),
    "ip_literal_http": http_get("http://%s:8080/" % mirror_ip),
    "ip_literal_decimal": tunnel("%s:8080" % decimal),
    "metadata": http_get("http://169.254.169.254/latest/meta-data/"),
    "private": tunnel("private.autopatch.test:8080"),
    "loopback": tunnel("localhost:8080"),
    "direct": direct_results,
    "dns": {n: dns(n) for n in ("mirror.autopatch.test", "other.autopatch.test",
                                "example.com")},
}))
"""

DENIALS = ["not_listed", "not_listed_http", "wrong_port", "ip_literal", "ip_literal_http",
           "ip_literal_decimal", "metadata", "private", "loopback", "connect_fronted",
           "connect_not_tls"]


def docker(*args, check=True, timeout=60):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def owned(owner, kind="container", extra=()):
    flt = ["--filter", f"label=autopatch.owner={owner}", *extra]
    if kind == "container":
        out = docker("ps", "-aq", "--no-trunc", *flt)
    else:
        out = docker("network", "ls", "-q", *flt)
    return [line for line in out.stdout.split() if line]


def cleanup(owner):
    ids = owned(owner)
    if ids:
        docker("rm", "-f", *ids, check=False)
    for net in owned(owner, "network"):
        docker("network", "rm", net, check=False)


def container_ip(name, network):
    out = docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", name)
    return json.loads(out.stdout)[network]["IPAddress"]


def driver_env(owner, tmp, **extra):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AUTOPATCH_OWNER_ID": owner,
        "AUTOPATCH_ENV_FILE": str(tmp / ".env"),
        "AUTOPATCH_EGRESS_PROXY_BIN": str(PROXY_BIN),
        "AUTOPATCH_EGRESS_IMAGE": IMAGE,
    }
    (tmp / ".env").touch()
    if "DOCKER_HOST" in os.environ:
        env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Outer network with mirror + decoy, the job's egress (driver), a sandbox on it, and the
    probe's findings. Tears everything down at the end and records what was left."""
    assert DRIVER.exists() and PROXY_BIN.exists(), "build first (scripts/test.sh does)"
    tmp = tmp_path_factory.mktemp("egress")
    owner = "t" + uuid.uuid4().hex[:12]
    outer = f"autopatch-egress-test-{owner}"
    labels = ["--label", f"autopatch.owner={owner}", "--label", "autopatch.job=egress-e2e"]
    w = {"owner": owner}
    driver = None
    try:
        docker("network", "create", *labels, outer)
        hardened = ["--read-only", "--cap-drop", "ALL", "--security-opt",
                    "no-new-privileges", "--user", "10001:10001", "--memory", "256m"]
        docker("run", "-d", "--name", f"{outer}-mirror", "--network", outer,
               "--network-alias", "mirror.autopatch.test", *labels, *hardened, IMAGE,
               "python3", "-c", SERVER)
        docker("run", "-d", "--name", f"{outer}-decoy", "--network", outer,
               "--network-alias", "other.autopatch.test", "--network-alias",
               "private.autopatch.test", *labels, *hardened, IMAGE, "python3", "-c", SERVER)
        mirror_ip = container_ip(f"{outer}-mirror", outer)
        gateway = json.loads(docker("network", "inspect", outer).stdout)[0]["IPAM"]["Config"][0]
        host_ips = subprocess.run(["hostname", "-I"], capture_output=True,
                                  text=True).stdout.split()
        direct = sorted({gateway.get("Gateway", ""), *host_ips} - {""})
        direct = [ip for ip in direct if ":" not in ip]
        # a real service on every host address: the sandbox must not reach it
        host_srv = socket.socket()
        host_srv.bind(("0.0.0.0", 0))
        host_srv.listen(16)
        host_srv.setblocking(False)
        w["host_port"] = host_srv.getsockname()[1]

        # Only the mirror's own address is opened up; the decoy on the same network is not.
        env = driver_env(owner, tmp, AUTOPATCH_EGRESS_NETWORK=outer,
                         AUTOPATCH_EGRESS_ALLOW_NETS=f"{mirror_ip}/32")
        started = time.monotonic()
        driver = subprocess.Popen(
            [str(DRIVER), "--job", "egress-e2e", "mirror.autopatch.test:8080",
             "mirror.autopatch.test:8443", "private.autopatch.test:8080", "localhost:8080"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)
        up_line = driver.stdout.readline()
        assert up_line, driver.stderr.read()
        w["up"] = json.loads(up_line)
        w["up_seconds"] = time.monotonic() - started
        w["proxy"] = owned(owner, extra=("--filter", "label=autopatch.role=egress-proxy"))
        w["net_info"] = json.loads(docker("network", "inspect", w["up"]["network"]).stdout)[0]

        sandbox = f"{outer}-sandbox"
        envs = [a for e in w["up"]["env"] for a in ("-e", e)]
        docker("run", "-d", "--name", sandbox, "--network", w["up"]["network"], *labels,
               *hardened, "--tmpfs", "/tmp", *envs, IMAGE, "sleep", "600")
        # short resolver timeouts: a failing lookup otherwise takes ~10 s each
        probe = docker("exec", "-e", f"HOST_PORT={w['host_port']}", "-e",
                       "RES_OPTIONS=timeout:1 attempts:1", sandbox, "python3", "-c",
                       PROBE, mirror_ip, *direct, timeout=120)
        w["probe"] = json.loads(probe.stdout)
        w["probe_seconds"] = time.monotonic() - started
        w["host_server_hits"] = 0
        try:
            while True:
                host_srv.accept()[0].close()
                w["host_server_hits"] += 1
        except BlockingIOError:
            pass
        host_srv.close()
        w["sandbox_env"] = docker("exec", sandbox, "env").stdout.splitlines()
        w["direct"] = direct
        driver.stdin.write("drain\n")
        driver.stdin.flush()
        w["drain"] = json.loads(driver.stdout.readline())
        docker("rm", "-f", sandbox)
        driver.stdin.close()
        w["down"] = json.loads(driver.stdout.readline())
        driver.wait(timeout=60)
        w["log"] = driver.stderr.read()
        w["left_networks"] = owned(owner, "network")
        w["left_proxies"] = owned(owner, extra=("--filter", "label=autopatch.role=egress-proxy"))
        w["outer"] = outer
        w["mirror_ip"] = mirror_ip
        w["tmp"] = tmp
        yield w
    finally:
        if driver and driver.poll() is None:
            driver.kill()
        cleanup(owner)


def test_proxy_comes_up_on_an_internal_network(world):
    net = world["up"]["network"]
    info = json.loads(docker("network", "inspect", world["outer"]).stdout)[0]
    assert info["Internal"] is False  # the test's outer network, for contrast
    assert world["up"]["proxy_url"].startswith("http://")
    assert world["up"]["proxy_url"].endswith(":3128")
    assert len(world["proxy"]) == 1
    assert net.startswith("autopatch-egress-")
    assert world["up_seconds"] < 20


def test_internal_network_is_labelled_and_sandbox_gets_proxy_env(world):
    info = world["net_info"]
    assert info["Internal"] is True
    assert info["Labels"]["autopatch.owner"] == world["owner"]
    assert info["Labels"]["autopatch.job"] == "egress-e2e"
    assert "autopatch.creator" in info["Labels"]
    assert any(line.startswith("HTTP_PROXY=http://") for line in world["sandbox_env"])
    assert "NO_PROXY=" in world["sandbox_env"]
    assert any(line.startswith("https_proxy=http://") for line in world["sandbox_env"])


def test_allowed_host_port_works_through_the_proxy(world):
    p = world["probe"]
    assert p["env_get"] == [200, "mirror-ok /env host=mirror.autopatch.test:8080\n"]
    # plain HTTP: origin-form upstream, the client's Host header replaced by the allowed name
    assert p["http_allowed"][0] == 200
    assert p["http_allowed"][1] == "mirror-ok /pkg?x=1 host=mirror.autopatch.test:8080\n"
    # CONNECT: the ClientHello names the CONNECT host and reaches the server byte for byte
    assert p["connect_allowed"] == [200, p["hello_sent"]]


def test_tunnel_must_carry_tls_naming_the_connect_host(world):
    """Domain fronting (allowed host, other SNI) and a tunnel that is not TLS (port 8080) are
    closed right after the 200, before anything reaches the mirror."""
    p = world["probe"]
    assert p["connect_fronted"] == [200, ""]
    assert p["connect_not_tls"] == [200, ""]


def test_not_listed_host_or_port_is_refused_with_reason(world):
    p = world["probe"]
    for key in ("not_listed", "not_listed_http", "wrong_port"):
        assert p[key][0] == 403, key
        assert "not on the egress allow-list" in p[key][1], key
        assert "mirror-ok" not in p[key][1]


def test_ip_literals_are_refused(world):
    p = world["probe"]
    for key in ("ip_literal", "ip_literal_http", "ip_literal_decimal", "metadata"):
        assert p[key][0] == 403, key
        assert "IP address literals are not allowed" in p[key][1], key


def test_listed_names_resolving_to_private_or_loopback_are_refused(world):
    p = world["probe"]
    assert p["private"][0] == 403
    assert "resolves to a private address" in p["private"][1]
    assert p["loopback"][0] == 403
    assert "resolves to a loopback address" in p["loopback"][1]


def test_direct_tcp_without_the_proxy_fails(world):
    """The mirror, the outer network's gateway, the host's own addresses (with a real server
    listening on 0.0.0.0) and the Internal network's default gateway: none answers."""
    direct = world["probe"]["direct"]
    assert any(t.endswith(":%d" % world["host_port"]) for t in direct)
    assert len({t.rsplit(":", 1)[0] for t in direct}) >= len(world["direct"]) + 2
    for target, result in direct.items():
        assert result.startswith("failed"), (target, result)
    assert world["host_server_hits"] == 0


def test_sandbox_has_no_dns(world):
    for name, result in world["probe"]["dns"].items():
        assert result.startswith("failed"), (name, result)


def test_each_denial_is_logged(world):
    assert world["drain"]["denials"] == len(DENIALS)
    lines = [json.loads(l) for l in world["log"].splitlines() if l.startswith("{")]
    denied = [l["msg"] for l in lines if l["msg"].startswith("egress denied")]
    assert len(denied) == len(DENIALS)
    assert all(l["level"] == "warn" for l in lines if l["msg"].startswith("egress denied"))
    assert any("CONNECT other.autopatch.test:8080" in m and "allow-list" in m for m in denied)
    assert any("private address" in m for m in denied)
    assert any("169.254.169.254" in m for m in denied)
    assert any("CONNECT mirror.autopatch.test:8443" in m and
               "TLS server name (SNI) other.autopatch.test is not the CONNECT host" in m
               for m in denied)
    assert any("CONNECT mirror.autopatch.test:8080" in m and "did not start with a TLS" in m
               for m in denied)
    allowed = [l["msg"] for l in lines if l["msg"].startswith("egress allowed")]
    assert len(allowed) == 3


def test_network_and_proxy_are_removed_on_down(world):
    assert world["down"]["down"] == 0
    assert world["left_proxies"] == []
    assert world["up"]["network"] not in [
        json.loads(docker("network", "inspect", n).stdout)[0]["Name"]
        for n in world["left_networks"]]
    # only the test's own outer network is left for its cleanup
    assert len(world["left_networks"]) == 1


def test_runsc_is_refused_before_anything_is_created(tmp_path):
    owner = "t" + uuid.uuid4().hex[:12]
    out = subprocess.run([str(DRIVER), "--runtime", "runsc", "mirror.autopatch.test:8080"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=driver_env(owner, tmp_path), timeout=60)
    assert out.returncode == 1
    assert "not available with the runsc runtime" in out.stderr
    assert owned(owner) == [] and owned(owner, "network") == []


def test_failed_proxy_start_leaves_nothing(tmp_path):
    owner = "t" + uuid.uuid4().hex[:12]
    try:
        out = subprocess.run([str(DRIVER), "mirror.autopatch.test:8080"],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             env=driver_env(owner, tmp_path,
                                            AUTOPATCH_EGRESS_IMAGE="autopatch-no-such-image:0"),
                             timeout=60)
        assert out.returncode == 1
        assert "autopatch-no-such-image" in out.stderr
        assert owned(owner) == [] and owned(owner, "network") == []
    finally:
        cleanup(owner)


def test_bad_allow_list_is_refused(tmp_path):
    owner = "t" + uuid.uuid4().hex[:12]
    out = subprocess.run([str(DRIVER), "10.0.0.1:80"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, env=driver_env(owner, tmp_path),
                         timeout=60)
    assert out.returncode == 1
    assert "10.0.0.1:80" in out.stderr
    assert owned(owner, "network") == []


CLI_PROBE = r"""
import urllib.error, urllib.request
print(urllib.request.urlopen("http://mirror.autopatch.test:8080/cli", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://other.autopatch.test:8080/", timeout=10)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
"""


def test_sandbox_run_with_allow_reaches_the_mirror(world, autopatch_bin):
    """Through the backend: `autopatch sandbox run --allow` gets the mirror, is refused the
    rest, logs the denial, and leaves nothing (proxy found next to the binary)."""
    owner = "t" + uuid.uuid4().hex[:12]
    env = driver_env(owner, world["tmp"], AUTOPATCH_EGRESS_NETWORK=world["outer"],
                     AUTOPATCH_EGRESS_ALLOW_NETS=f"{world['mirror_ip']}/32",
                     AUTOPATCH_DATA_DIR=str(world["tmp"] / "data"))
    env.pop("AUTOPATCH_EGRESS_PROXY_BIN")
    try:
        out = subprocess.run([str(autopatch_bin), "sandbox", "run", "--allow",
                              "mirror.autopatch.test:8080", "--", "python3", "-c", CLI_PROBE],
                             capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "mirror-ok /cli host=mirror.autopatch.test:8080" in out.stdout
        assert "403 autopatch egress: host:port is not on the egress allow-list" in out.stdout
        assert '"level":"warn","msg":"egress denied' in out.stderr
        assert "GET http://other.autopatch.test:8080/" in out.stderr
        assert owned(owner) == [] and owned(owner, "network") == []
    finally:
        cleanup(owner)


def test_crash_leftovers_are_reaped(tmp_path, autopatch_bin):
    """SIGKILL while the egress is up leaves network + proxy; the start-up reaper (here
    `autopatch sandbox reap`) removes both because their creator label names a dead process."""
    owner = "t" + uuid.uuid4().hex[:12]
    env = driver_env(owner, tmp_path, AUTOPATCH_DATA_DIR=str(tmp_path / "data"))
    try:
        driver = subprocess.Popen([str(DRIVER), "mirror.autopatch.test:8080"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, env=env)
        assert json.loads(driver.stdout.readline())["network"]
        driver.kill()
        driver.wait(timeout=30)
        assert len(owned(owner)) == 1 and len(owned(owner, "network")) == 1
        out = subprocess.run([str(autopatch_bin), "sandbox", "reap"], capture_output=True,
                             text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        assert owned(owner) == [] and owned(owner, "network") == []
    finally:
        cleanup(owner)
