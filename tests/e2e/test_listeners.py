"""The two listeners and the flood limits, through the real `autopatch serve` (issue 11, items 3
and 4).

- The public listener serves the webhook path and GET /healthz only: everything else is a JSON
  404, from every client, loopback included (no decision trusts the client's address).
- The admin listener (a loopback port, a unix socket with a restrictive mode, or off) serves
  the status page and /metrics, and never the webhook path.
- Through a real reverse proxy (Debian's nginx, started by the test) the status page and
  /metrics are 404 and a signed delivery is accepted.
- One address holding as many slow connections as it may (a byte at a time, never finishing
  its headers) does not stop a signed delivery from another address (127.0.0.2) being
  accepted within 1 s, and the server cuts the slow connections when the header deadline
  passes; a body that trickles past its deadline is cut too.
"""
import copy
import json
import os
import resource
import select
import shutil
import signal
import socket
import stat
import subprocess
import time

import pytest

from server_util import HOOK, Server, clean_env, examples, free_port, sign

REPO = "e2e/private-status-repo"  # a name only the status page shows


def labeled(number, repo=REPO):
    p = copy.deepcopy([e for e in examples("issues") if e["action"] == "labeled"][0])
    p["installation"] = {"id": 31337}
    p["repository"]["full_name"] = repo
    p["issue"]["number"] = number
    return p


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise KeyError(name)


# Paths a stranger tries on the public port; none of them may answer anything but 404.
PROBES = ["/", "/metrics", "/status", "/index.html", "/admin", "/jobs", "/setup", "/console",
          "/healthz/", "/metrics/", "//", "/?x=1", "/metrics?format=text", HOOK + "/x",
          "/api/github", "/%2e", "/./metrics", "/Metrics"]


def test_public_listener_serves_only_webhooks_and_healthz(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    try:
        assert s.post(labeled(1))[0] == 202
        status, body = s.get("/healthz")
        assert status == 200 and json.loads(body)["ok"] is True
        for path in PROBES:
            for method in ("GET", "HEAD", "POST"):
                status, ctype, body = s.request(method, path)
                assert status == 404, (method, path, status, body)
                assert REPO.encode() not in body and b"autopatch_" not in body
                if method != "HEAD":
                    assert ctype.startswith("application/json")
                    assert json.loads(body) == {"message": "not found"}
        # the admin listener has them, and has no webhook path
        status, ctype, page = s.admin_request("GET", "/")
        assert status == 200 and ctype.startswith("text/html") and REPO.encode() in page
        status, text = s.admin_get("/metrics")
        assert status == 200 and b"autopatch_jobs{state=\"queued\"} 1" in text
        assert s.admin_get("/healthz")[0] == 200
        assert s.admin_request("POST", HOOK)[0] == 404
        assert s.admin_get("/nope")[0] == 404
        assert "admin listener (status page, /metrics) on " + s.admin in s.log_text()
    finally:
        s.stop()


@pytest.mark.parametrize("mode", [None, "0660"])
def test_admin_listener_on_a_unix_socket(autopatch_bin, tmp_path, port, mode):
    sock = tmp_path / "run" / "admin.sock"
    sock.parent.mkdir()
    settings = {"AUTOPATCH_ADMIN_LISTEN": f"unix:{sock}", "AUTOPATCH_LABEL": "bug"}
    if mode:
        settings["AUTOPATCH_ADMIN_SOCKET_MODE"] = mode
    s = Server(autopatch_bin, tmp_path, port, **settings).start()
    try:
        st = os.lstat(sock)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == (0o660 if mode else 0o600)
        assert s.post(labeled(2))[0] == 202
        status, ctype, page = s.admin_request("GET", "/")
        assert status == 200 and REPO.encode() in page
        assert b"autopatch_jobs{state=\"queued\"} 1" in s.admin_get("/metrics")[1]
        # the same through curl --unix-socket
        out = subprocess.run(["curl", "-sS", "--unix-socket", str(sock), "http://localhost/"],
                             capture_output=True, timeout=30)
        assert out.returncode == 0 and REPO.encode() in out.stdout
        # and nothing of it on TCP
        assert s.get("/")[0] == 404 and s.get("/metrics")[0] == 404
    finally:
        assert s.stop() == 0
    assert not sock.exists(), "the socket file outlived the server"


def test_admin_listener_replaces_a_stale_socket_file(autopatch_bin, tmp_path, port):
    sock = tmp_path / "admin.sock"
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_ADMIN_LISTEN=f"unix:{sock}").start()
    s.stop(signal.SIGKILL)  # no clean-up runs: the file stays
    assert sock.exists()
    s2 = Server(autopatch_bin, tmp_path, port, AUTOPATCH_ADMIN_LISTEN=f"unix:{sock}").start()
    try:
        assert s2.admin_get("/healthz")[0] == 200
    finally:
        s2.stop()


def test_admin_listener_off(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_ADMIN_LISTEN="off").start()
    try:
        assert s.get("/")[0] == 404 and s.get("/metrics")[0] == 404
        assert "admin listener off" in s.log_text()
    finally:
        s.stop()


def run_serve(binary, tmp, **env):
    base = dict(WEBHOOK_SECRET="x" * 16, AUTOPATCH_BIND="127.0.0.1", AUTOPATCH_WORKERS=0,
                AUTOPATCH_DB=tmp / "a.db", PORT=free_port())
    base.update(env)
    return subprocess.run([binary, "serve"], cwd=tmp, env=clean_env(tmp, **base),
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("env,needle", [
    ({"AUTOPATCH_STATUS_PUBLIC": "true"}, "AUTOPATCH_ADMIN_LISTEN"),
    ({"AUTOPATCH_STATUS_PUBLIC": "false"}, "AUTOPATCH_STATUS_PUBLIC is no longer supported"),
    ({"AUTOPATCH_ADMIN_LISTEN": "localhost:9464"}, "AUTOPATCH_ADMIN_LISTEN=\"localhost:9464\""),
    ({"AUTOPATCH_ADMIN_LISTEN": "127.0.0.1"}, "AUTOPATCH_ADMIN_LISTEN"),
    ({"AUTOPATCH_ADMIN_LISTEN": "127.0.0.1:70000"}, "AUTOPATCH_ADMIN_LISTEN"),
    ({"AUTOPATCH_ADMIN_LISTEN": "unix:"}, "AUTOPATCH_ADMIN_LISTEN"),
    ({"AUTOPATCH_ADMIN_LISTEN": "unix:/nonexistent/dir/admin.sock"},
     "cannot listen on unix:/nonexistent/dir/admin.sock (No such file or directory): set "
     "AUTOPATCH_ADMIN_LISTEN"),
    ({"AUTOPATCH_ADMIN_LISTEN": "unix:/tmp/x.sock", "AUTOPATCH_ADMIN_SOCKET_MODE": "0666"},
     "AUTOPATCH_ADMIN_SOCKET_MODE"),
    ({"AUTOPATCH_MAX_CONNECTIONS": "100", "AUTOPATCH_MAX_CONNECTIONS_PER_IP": "60"},
     "AUTOPATCH_MAX_CONNECTIONS_PER_IP=60 leaves no headroom"),
    ({"AUTOPATCH_MAX_CONNECTIONS": "1"}, "AUTOPATCH_MAX_CONNECTIONS"),
    ({"AUTOPATCH_HEADERS_DEADLINE_S": "0"}, "AUTOPATCH_HEADERS_DEADLINE_S"),
    ({"AUTOPATCH_BODY_DEADLINE_S": "soon"}, "AUTOPATCH_BODY_DEADLINE_S"),
])
def test_listener_misconfiguration_exits_2_with_one_sentence(autopatch_bin, tmp_path, env,
                                                             needle):
    out = run_serve(autopatch_bin, tmp_path, **env)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


def test_admin_port_in_use_or_a_file_in_the_way_exits_2(autopatch_bin, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        addr = "127.0.0.1:%d" % taken.getsockname()[1]
        out = run_serve(autopatch_bin, tmp_path, AUTOPATCH_ADMIN_LISTEN=addr)
    assert out.returncode == 2, out
    assert out.stderr.strip().splitlines() == [
        f"autopatch: cannot listen on {addr} (Address already in use): set "
        "AUTOPATCH_ADMIN_LISTEN to a free ADDRESS:PORT, to unix:PATH in a directory autopatch "
        "can write, or to off"]
    # the public port itself
    port = free_port()
    out = run_serve(autopatch_bin, tmp_path, PORT=port, AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{port}")
    assert out.returncode == 2 and "Address already in use" in out.stderr, out
    # a regular file where the socket should go is neither used nor removed
    f = tmp_path / "admin.sock"
    f.write_text("keep me")
    out = run_serve(autopatch_bin, tmp_path, AUTOPATCH_ADMIN_LISTEN=f"unix:{f}")
    assert out.returncode == 2 and "not a socket" in out.stderr, out
    assert f.read_text() == "keep me"


NGINX_CONF = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 26m;
    client_body_buffer_size 1m;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Real-IP $remote_addr;
        }}
    }}
}}
"""


@pytest.fixture
def nginx(tmp_path):
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.path.exists(binary), "nginx is missing: scripts/bootstrap.sh installs it"
    procs = []

    def start(upstream):
        d = tmp_path / "nginx"
        d.mkdir()
        port = free_port()
        conf = d / "nginx.conf"
        conf.write_text(NGINX_CONF.format(tmp=d, port=port, upstream=upstream))
        p = subprocess.Popen([binary, "-p", str(d), "-e", str(d / "error.log"), "-c", str(conf),
                              "-g", "daemon off;"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        procs.append(p)
        deadline = time.time() + 10
        while time.time() < deadline:
            assert p.poll() is None, p.stderr.read().decode()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return port
            except OSError:
                time.sleep(0.05)
        raise AssertionError("nginx did not listen within 10 s")

    yield start
    for p in procs:
        p.send_signal(signal.SIGQUIT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_through_a_reverse_proxy_the_status_page_is_not_served(autopatch_bin, tmp_path, port,
                                                               nginx):
    """nginx on the same host connects from 127.0.0.1: under the old peer-address rule every
    stranger got the status page through it."""
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    try:
        proxy = nginx(port)
        status, body = s.post(labeled(7), port=proxy)
        assert status == 202 and body["message"] == "queued", body
        assert s.post(labeled(7), port=proxy)[0] == 200  # a second trigger: job active
        status, _, body = s.request("GET", "/healthz", port=proxy)
        assert status == 200 and json.loads(body)["ok"] is True
        seen = b""
        for path in PROBES:
            for headers in ({}, {"X-Forwarded-For": "127.0.0.1"}, {"X-Real-IP": "::1"},
                            {"Host": "localhost"}):
                status, _, body = s.request("GET", path, headers=headers, port=proxy)
                assert status == 404, (path, headers, status, body)
                seen += body
        assert REPO.encode() not in seen and b"autopatch_jobs" not in seen
        # the deliveries did arrive: the admin listener shows them
        assert REPO.encode() in s.admin_get("/")[1]
    finally:
        s.stop()


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


class SlowClients:
    """n connections from 127.0.0.1 that send a request head one byte at a time and never
    finish it. Records when the server closed each one."""

    HEAD = (b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: autopatch\r\n"
            b"Content-Type: application/json\r\nX-Padding: " + b"a" * 4096)

    def __init__(self, port, n):
        self.socks, self.closed_at, self.sent = [], {}, {}
        for _ in range(n):
            c = socket.socket()
            try:
                c.connect(("127.0.0.1", port))
            except OSError:
                c.close()
                continue
            c.setblocking(False)
            self.socks.append(c)
            self.sent[c] = 0
        self.drip()

    def open(self):
        return [c for c in self.socks if c not in self.closed_at]

    def poll(self):
        """Notice connections the server closed (end-of-file or reset)."""
        live = self.open()
        while live:
            readable, _, _ = select.select(live, [], [], 0)
            if not readable:
                return
            for c in readable:
                try:
                    data = c.recv(4096)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                except BlockingIOError:
                    continue
                assert not data.startswith(b"HTTP/1.1 2"), data
                if not data:
                    self.closed_at[c] = time.monotonic()
            live = [c for c in readable if c not in self.closed_at]

    def drip(self):
        """One more byte on every open connection."""
        for c in self.open():
            try:
                c.send(self.HEAD[self.sent[c]:self.sent[c] + 1])
                self.sent[c] += 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.closed_at[c] = time.monotonic()
        self.poll()

    def close(self):
        for c in self.socks:
            c.close()


@pytest.mark.parametrize("per_ip,max_conn", [(None, None), (300, 640)],
                         ids=["defaults", "300-per-address"])
def test_one_address_flooding_slow_connections_does_not_stop_deliveries(
        autopatch_bin, tmp_path, port, per_ip, max_conn):
    headers_s = 3
    settings = {"AUTOPATCH_LABEL": "bug", "AUTOPATCH_HEADERS_DEADLINE_S": headers_s}
    if per_ip:
        settings.update(AUTOPATCH_MAX_CONNECTIONS_PER_IP=per_ip,
                        AUTOPATCH_MAX_CONNECTIONS=max_conn)
    held_max = per_ip or 32  # the default per-address limit
    n = 800
    raise_fd_limit(n + 200)
    s = Server(autopatch_bin, tmp_path, port, **settings).start()
    flood = None
    try:
        t0 = time.monotonic()
        flood = SlowClients(port, n)
        # The connections over the per-address limit are closed at once.
        while time.monotonic() - t0 < 1.0:
            time.sleep(0.1)
            flood.drip()
        held = flood.open()
        assert len(held) == held_max, (len(held), held_max)
        # Meanwhile a signed delivery from another address is accepted within 1 s, each time.
        took = []
        for i in range(3):
            t = time.monotonic()
            status, body = s.post(labeled(100 + i), source="127.0.0.2")
            took.append(time.monotonic() - t)
            assert status == 202, body
            flood.drip()
            time.sleep(0.2)
        print(f"\nheld {len(held)} slow connections from 127.0.0.1 of {n} opened; deliveries "
              f"from 127.0.0.2 accepted in {', '.join('%.3f s' % x for x in took)}")
        assert max(took) < 1.0, took
        assert flood.open(), "the slow connections were cut before their deadline"
        # The server cuts every held connection once its header deadline passes, although each
        # one is still sending (so no idle timeout applies).
        while flood.open() and time.monotonic() - t0 < headers_s + 3:
            time.sleep(0.25)
            flood.drip()
        assert not flood.open(), f"{len(flood.open())} slow connections outlived the deadline"
        cut = sorted(flood.closed_at[c] - t0 for c in held)
        print(f"held connections cut {cut[0]:.2f} s to {cut[-1]:.2f} s after they opened "
              f"(header deadline {headers_s} s)")
        assert cut[0] >= headers_s - 0.5, cut[0]
        assert cut[-1] <= headers_s + 1.5, cut[-1]
        text = s.admin_get("/metrics")[1].decode()
        assert metric(text, 'autopatch_http_deadline_closed_total{phase="headers"}') >= held_max
        # And the flooding address is served again.
        assert s.post(labeled(200))[0] == 202
    finally:
        if flood:
            flood.close()
        s.stop()


def test_a_body_trickling_past_its_deadline_is_cut(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug",
               AUTOPATCH_BODY_DEADLINE_S=2).start()
    body = json.dumps(labeled(5)).encode()
    head = (f"POST {HOOK} HTTP/1.1\r\nHost: autopatch\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: issues\r\nX-GitHub-Delivery: 11111111-2222-3333-4444-555555555555"
            f"\r\nX-Hub-Signature-256: {sign(body)}\r\nContent-Length: {len(body)}\r\n\r\n")
    try:
        # Slow but within the deadline: accepted (it is a deadline, not a speed limit).
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(head.encode())
        third = len(body) // 3
        for part in (body[:third], body[third:2 * third], body[2 * third:]):
            time.sleep(0.4)
            c.sendall(part)
        assert c.recv(4096).startswith(b"HTTP/1.1 202"), "a body within its deadline failed"
        c.close()
        # One byte every 0.3 s: cut when the deadline passes, never answered with a 2xx.
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(head.replace("5555555555555", "6666666666666").encode())
        t0 = time.monotonic()
        closed = None
        for b in body[:40]:
            time.sleep(0.3)
            try:
                c.send(bytes([b]))
            except OSError:
                closed = time.monotonic() - t0
                break
            r, _, _ = select.select([c], [], [], 0)
            if r:
                try:
                    data = c.recv(4096)
                except ConnectionResetError:
                    data = b""
                assert not data, data
                closed = time.monotonic() - t0
                break
        c.close()
        assert closed is not None, "a body trickling for 12 s was not cut"
        assert 1.5 <= closed <= 3.5, closed
        text = s.admin_get("/metrics")[1].decode()
        assert metric(text, 'autopatch_http_deadline_closed_total{phase="body"}') == 1, text
        assert len(s.jobs()) == 1
    finally:
        s.stop()
