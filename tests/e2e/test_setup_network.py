"""Setup through real networks (issue 28): a TLS-intercepting network's CA handed to the setup
phase (AUTOPATCH_SETUP_CA_FILE), a burst of connections as package managers open them, and
the blocked-egress report that names what fits each kind of refusal.

One server container on an outer Docker network of the test's own, as tls.autopatch.test:
HTTPS on 8443 with a certificate from a CA this test makes with openssl (the box cannot
verify it without that CA, as behind a corporate proxy that re-signs every site), serving a
simple-repository Python index with a wheel and a git repository (dumb HTTP); plain HTTP on
8080 answering /slow after 1.5 s. A second container is lan.autopatch.test, a private address
outside AUTOPATCH_EGRESS_ALLOW_NETS (which opens only the server's own address).

The setup steps, in order: 50 concurrent GETs through the proxy (all must be answered);
Python's urllib over TLS (SSL_CERT_FILE); pip from the HTTPS index (PIP_CERT); git ls-remote
over HTTPS (GIT_SSL_CAINFO); a probe of a host not listed, a listed name that does not
resolve and a listed name resolving to a private address. With the CA file the job is
proven and the report gives each refusal its own advice; without it setup stops at the first
TLS step with a sentence naming AUTOPATCH_SETUP_CA_FILE, before any model call.
"""
import json
import os
import subprocess
import uuid

import pytest

from agents_util import CALC, call, happy, make_calc_repo, step, tool_results
from test_environments import PY_IMAGE, build_wheel, commit_all, docker, have_image, run_fix

TLS_HOST = "tls.autopatch.test"
LAN_HOST = "lan.autopatch.test"

SERVER = r"""
import http.server, ssl, sys, threading, time


class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/slow"):
            time.sleep(1.5)
            body = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, fmt, *args):
        sys.stderr.write("%d %.3f %s\n" % (self.server.server_address[1], time.time(),
                                             fmt % args))


class S(http.server.ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True


def serve(port, tls):
    s = S(("0.0.0.0", port), lambda *a, **k: H(*a, directory="/srv/www", **k))
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain("/srv/tls/server.pem", "/srv/tls/server.key")
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.serve_forever()


threading.Thread(target=serve, args=(8080, False), daemon=True).start()
serve(8443, True)
"""

BURST = """\
import concurrent.futures, sys, time, urllib.request

url, n = sys.argv[1], int(sys.argv[2])


def get(i):
    with urllib.request.urlopen(f"{url}?i={i}", timeout=150) as r:
        return r.status


t = time.time()
with concurrent.futures.ThreadPoolExecutor(n) as ex:
    codes = list(ex.map(get, range(n)))
ok = sum(c == 200 for c in codes)
print(f"burst: {ok}/{n} answered in {time.time() - t:.1f} s")
sys.exit(0 if ok == n else 1)
"""

PROBE = f"""\
import urllib.request

for url in ("http://denied.autopatch.test:8080/", "http://nxdomain.autopatch.test:8080/",
            "http://{LAN_HOST}:8080/"):
    try:
        urllib.request.urlopen(url, timeout=60)
        print(url, "answered")
    except Exception as e:
        print(url, "refused:", e)
"""

HELPER_TEST = """\
import aphelper


def test_the_wheel_from_the_https_index_is_installed():
    assert aphelper.double(21) == 42
"""

STEPS = [
    f"python3 burst.py http://{TLS_HOST}:8080/slow 50",
    f"python3 -c \"import urllib.request; urllib.request.urlopen('https://{TLS_HOST}:8443/ok.txt')\"",
    "pip install --user --break-system-packages --no-cache-dir --index-url "
    f"https://{TLS_HOST}:8443/simple/ -r requirements.txt",
    f"git ls-remote https://{TLS_HOST}:8443/repo.git",
    "python3 probe.py",
]

CONFIG = "setup:\n" + "".join(f"  - {json.dumps(s)}\n" for s in STEPS) + f"""\
network: ["{TLS_HOST}:8443", "{TLS_HOST}:8080", "nxdomain.autopatch.test:8080", "{LAN_HOST}:8080"]
test: python3 -m pytest -q
"""

CA_PROBE = "ls /tmp/.ap-ca; echo CA-VAR=${SSL_CERT_FILE}${PIP_CERT}."


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls(d):
    """A CA and a server certificate for TLS_HOST signed by it (the "intercepting" chain)."""
    d.mkdir()
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=autopatch test intercepting CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", f"/CN={TLS_HOST}", cwd=d)
    # What Python 3.13's strict verification wants of a leaf (VERIFY_X509_STRICT).
    (d / "ext").write_text(f"subjectAltName=DNS:{TLS_HOST}\nbasicConstraints=CA:FALSE\n"
                           "keyUsage=critical,digitalSignature,keyEncipherment\n"
                           "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\n"
                           "authorityKeyIdentifier=keyid\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext", cwd=d)
    for p in d.iterdir():
        os.chmod(p, 0o644)


def make_www(www, tmp):
    simple = www / "simple" / "aphelper"
    simple.mkdir(parents=True)
    wheel = build_wheel("aphelper", "1.0", "def double(x):\n    return 2 * x\n")
    (simple / "aphelper-1.0-py3-none-any.whl").write_bytes(wheel)
    (simple / "index.html").write_text('<a href="aphelper-1.0-py3-none-any.whl">w</a>\n')
    (www / "simple" / "index.html").write_text('<a href="aphelper/">aphelper</a>\n')
    (www / "ok.txt").write_text("ok\n")
    src = tmp / "src"
    src.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    (src / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a"]):
        subprocess.run(["git", "-C", str(src), *args], check=True, env=env)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(www / "repo.git")],
                   check=True, env=env)
    subprocess.run(["git", "-C", str(www / "repo.git"), "update-server-info"], check=True)
    os.chmod(tmp, 0o755)
    for p in www.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    if not have_image(PY_IMAGE):
        pytest.fail(f"{PY_IMAGE} is missing: deploy/sandbox-image/build.sh --flavor python")
    tmp = tmp_path_factory.mktemp("setupnet")
    make_tls(tmp / "tls")
    make_www(tmp / "www", tmp)
    (tmp / "server.py").write_text(SERVER)
    os.chmod(tmp / "server.py", 0o644)
    tag = "apsetupnet-" + uuid.uuid4().hex[:10]
    labels = ["--label", "autopatch-test=setup-network"]
    w = {"outer": tag + "-net", "names": [], "ca": tmp / "tls" / "ca.pem"}
    docker("network", "create", *labels, w["outer"])
    try:
        name = tag + "-tls"
        docker("run", "-d", "--name", name, "--network", w["outer"], "--network-alias",
               TLS_HOST, *labels, "-v", f"{tmp}:/srv:ro", PY_IMAGE, "python3", "-u",
               "/srv/server.py")
        w["names"].append(name)
        w["server"] = name
        name = tag + "-lan"
        docker("run", "-d", "--name", name, "--network", w["outer"], "--network-alias",
               LAN_HOST, *labels, PY_IMAGE, "sleep", "900")
        w["names"].append(name)
        info = json.loads(docker("network", "inspect", w["outer"]).stdout)[0]
        ips = {c["Name"]: c["IPv4Address"].split("/")[0] for c in info["Containers"].values()}
        w["server_ip"], w["lan_ip"] = ips[w["server"]], ips[name]
        yield w
    finally:
        for n in w["names"]:
            docker("rm", "-f", n, check=False)
        docker("network", "rm", w["outer"], check=False)


def repo_for(tmp_path):
    repo = make_calc_repo(tmp_path, {
        ".github/autopatch.yml": CONFIG,
        "requirements.txt": "aphelper==1.0\n",
        "tests/test_helper.py": HELPER_TEST,
        "burst.py": BURST,
        "probe.py": PROBE,
    })
    (repo / "ISSUE.md").write_text((CALC / "ISSUE.md").read_text())
    commit_all(repo, "issue")
    return repo


def env_for(w, **extra):
    # Only the server's own address: lan.autopatch.test stays a refused private address.
    return {"AUTOPATCH_EGRESS_NETWORK": w["outer"],
            "AUTOPATCH_EGRESS_ALLOW_NETS": w["server_ip"] + "/32", **extra}


def blocked_lines(out):
    """The lines of fix's "BLOCKED network connections" section."""
    assert "BLOCKED network connections" in out, out[-3000:]
    lines = []
    for l in out.split("BLOCKED network connections", 1)[1].splitlines()[1:]:
        if not l.startswith("  - "):
            break
        lines.append(l.strip())
    return lines


def test_setup_trusts_the_ca_file_serves_a_burst_and_reports_each_refusal(net, autopatch_bin,
                                                                          tmp_path):
    repo = repo_for(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    script = happy()
    script["builder"].insert(1, step(call("run", command=CA_PROBE)))
    before = docker("logs", net["server"], check=False).stderr.count('"GET /slow?i=')
    r = run_fix(autopatch_bin, home, repo, script,
                env_for(net, AUTOPATCH_SETUP_CA_FILE=str(net["ca"])))
    out = r.stdout
    assert r.returncode == 0, out[-4000:] + r.stderr[-3000:]
    assert "setup trusts the 1 certificate of AUTOPATCH_SETUP_CA_FILE" in out, out[-3000:]
    assert "setup ran (" in out and "PROVEN" in out, out[-3000:]
    logs = docker("logs", net["server"], check=False).stderr
    # 50 concurrent connections through the proxy with the default limits: all answered
    assert logs.count('"GET /slow?i=') - before == 50, logs[-2000:]
    # every toolchain reached the HTTPS server through the CA: urllib, pip, git
    assert '"GET /ok.txt HTTP/1.1" 200' in logs
    assert '"GET /simple/aphelper/ HTTP/1.1" 200' in logs
    assert "/repo.git/info/refs" in logs
    # the Builder's run: no CA directory, no variable (setup only)
    results = [t for req in r.requests if req["role"] == "builder" for t in tool_results(req)]
    ca_result = [t for t in results if "CA-VAR=" in t]
    assert ca_result and "CA-VAR=." in ca_result[0], results[-3:]
    assert "No such file or directory" in ca_result[0], ca_result[0]

    text = "\n".join(blocked_lines(out))
    by = "during setup by `python3 probe.py`"
    denied = [l for l in text.splitlines() if l.startswith("- denied.autopatch.test:8080")]
    assert denied and by in denied[0], text
    assert "add `denied.autopatch.test:8080` to `network:`" in denied[0]
    dns = [l for l in text.splitlines() if l.startswith("- nxdomain.autopatch.test:8080")]
    assert dns and by in dns[0], text
    assert "the name nxdomain.autopatch.test could not be resolved" in dns[0], dns[0]
    assert "the autopatch host's resolver" in dns[0] and "`network:` in" not in dns[0]
    lan = [l for l in text.splitlines() if l.startswith(f"- {LAN_HOST}:8080")]
    assert lan and by in lan[0], text
    assert f"private address ({net['lan_ip']})" in lan[0], lan[0]
    assert f"add `{net['lan_ip']}/32` (or its network) to AUTOPATCH_EGRESS_ALLOW_NETS" in lan[0]
    assert "to `network:`" not in lan[0]
    assert "`-`" not in text and "- -" not in text, text
    assert not any("connections, during" in l for l in text.splitlines()), text


def test_without_the_ca_file_setup_stops_at_tls_with_a_sentence(net, autopatch_bin, tmp_path):
    repo = repo_for(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    before = docker("logs", net["server"], check=False).stderr.count('"GET /slow?i=')
    # A cap of 10: the burst of 50 waits in the proxy's queue instead of being refused.
    r = run_fix(autopatch_bin, home, repo, happy(),
                env_for(net, AUTOPATCH_EGRESS_MAX_CONNS="10"))
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    after = docker("logs", net["server"], check=False).stderr.count('"GET /slow?i=')
    assert after - before == 50
    # ... served 10 at a time: the answers came in waves 1.5 s apart (all 50 at once: ~0 s)
    lines = docker("logs", net["server"], check=False).stderr.splitlines()
    times = sorted(float(l.split()[1]) for l in lines if '"GET /slow?i=' in l)[-50:]
    assert times[-1] - times[0] >= 5.0, (times[0], times[-1])
    assert "too many concurrent connections" not in out
    assert "setup failed: `python3 -c" in out, out[-3000:]
    assert "CERTIFICATE_VERIFY_FAILED" in out, r.stdout[-3000:]
    assert "a TLS certificate could not be verified" in out
    assert "AUTOPATCH_SETUP_CA_FILE" in out
    assert r.requests == [], "a model call happened before setup succeeded"


def test_a_bad_ca_file_stops_fix_before_anything(autopatch_bin, tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    repo = make_calc_repo(tmp_path)
    (repo / "ISSUE.md").write_text((CALC / "ISSUE.md").read_text())
    home = tmp_path / "home"
    home.mkdir()
    r = run_fix(autopatch_bin, home, repo, happy(), {"AUTOPATCH_SETUP_CA_FILE": str(bad)})
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "AUTOPATCH_SETUP_CA_FILE" in out and str(bad) in out, out[-2000:]
    assert "not only certificates" in out, out[-2000:]
    assert r.requests == []
