"""Helpers for the server's end-to-end tests: start `autopatch serve` on a private database,
sign and post deliveries like GitHub does, read jobs back through `autopatch jobs --json`,
fetch the admin listener's pages (status page, /metrics) over TCP or a unix socket."""
import functools
import hashlib
import hmac
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import uuid

from ports import free_port  # noqa: F401 (tests import it from here)

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = (ROOT / "tests" / "fixtures" / "node_modules" / "@octokit" / "webhooks-examples"
            / "api.github.com" / "index.json")
HOOK = "/api/github/webhooks"
SECRET = "e2e-webhook-secret-7f3a9c"

# Settings that must not leak in from the caller's environment.
_OURS = ("WEBHOOK_SECRET", "WEBHOOK_SECRET_PREVIOUS", "PORT", "WEBHOOK_PATH", "AUTOPATCH_")


@functools.lru_cache(maxsize=1)
def _examples_index():
    """Each event's examples as JSON text, from the 4 MB index parsed once a process (about
    40 ms of CPU a parse: a test that queues a thousand jobs spent most of its time here)."""
    with open(EXAMPLES) as f:
        return {entry["name"]: json.dumps(entry["examples"]) for entry in json.load(f)}


def examples(event):
    """The pinned @octokit/webhooks-examples payloads of one event (a fresh copy: the caller
    may change it)."""
    return json.loads(_examples_index()[event])


def sign(body, secret=SECRET):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def clean_env(tmp, **overrides):
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
    (tmp / "empty.env").touch()  # no .env: everything comes from the environment
    env["AUTOPATCH_ENV_FILE"] = str(tmp / "empty.env")
    # The admin listener's default port is shared by every test on the machine: off unless a
    # test asks for one.
    env["AUTOPATCH_ADMIN_LISTEN"] = "off"
    env.update({k: str(v) for k, v in overrides.items()})
    return env




class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket (the admin listener's unix: form)."""

    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def http_request(conn, method, path, body=None, headers=None):
    """One request on a fresh connection: (status, content type, body bytes)."""
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        conn.close()


class Server:
    """One `autopatch serve` process with its own database, public port and admin listener
    (a free loopback port unless AUTOPATCH_ADMIN_LISTEN is given)."""

    def __init__(self, binary, tmp, port, command="serve", **settings):
        self.binary, self.tmp, self.port, self.command = binary, tmp, port, command
        self.db = settings.pop("AUTOPATCH_DB", str(tmp / "autopatch.db"))
        self.settings = dict(WEBHOOK_SECRET=SECRET, PORT=port, AUTOPATCH_BIND="127.0.0.1",
                             AUTOPATCH_DB=self.db, AUTOPATCH_WORKERS=0,
                             AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{free_port()}")
        self.settings.update(settings)
        self.admin = str(self.settings["AUTOPATCH_ADMIN_LISTEN"])
        self.proc = None
        self.log = tmp / f"serve-{port}.log"

    def start(self):
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen([self.binary, self.command], cwd=self.tmp,
                                     env=clean_env(self.tmp, **self.settings),
                                     stdout=self.logf, stderr=self.logf)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}: {self.log_text()}")
            try:
                if self.get("/healthz")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("serve did not answer /healthz within 10 s")

    def log_text(self):
        return self.log.read_text(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        if self.proc:
            self.logf.close()
        return self.proc.returncode if self.proc else None

    def request(self, method, path, body=None, headers=None, port=None, source=None):
        """On the public listener (or another port, e.g. a proxy's), optionally from a source
        address such as 127.0.0.2."""
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=30,
                                          source_address=(source, 0) if source else None)
        return http_request(conn, method, path, body, headers)

    def get(self, path):
        status, _, body = self.request("GET", path)
        return status, body

    def admin_request(self, method, path):
        """On the admin listener (ADDRESS:PORT or unix:PATH)."""
        if self.admin.startswith("unix:"):
            conn = UnixHTTPConnection(self.admin[5:])
        else:
            host, port = self.admin.rsplit(":", 1)
            conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=30)
        return http_request(conn, method, path)

    def admin_get(self, path):
        status, _, body = self.admin_request("GET", path)
        return status, body

    def post(self, payload, event="issues", delivery=None, secret=SECRET, headers=None,
             drop=(), port=None, source=None):
        """Sign and post like GitHub; returns (status, parsed JSON body)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        h = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
             "X-Hub-Signature-256": sign(body, secret), "Content-Type": "application/json",
             "User-Agent": "GitHub-Hookshot/e2e"}
        h.update(headers or {})
        for name in drop:
            h.pop(name, None)
        status, ctype, raw = self.request("POST", HOOK, body, h, port=port, source=source)
        assert ctype and ctype.startswith("application/json"), (status, ctype, raw)
        return status, json.loads(raw)

    def jobs(self):
        return jobs_json(self.binary, self.tmp, self.db)


def jobs_json(binary, tmp, db, *args):
    out = subprocess.run([binary, "jobs", "--json", *args], cwd=tmp,
                         env=clean_env(tmp, AUTOPATCH_DB=db), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def raw_exchange(port, head, chunks=(), read_timeout=30):
    """Send raw bytes (a request head, then body chunks), return the status line's code.
    A server may answer and close before the body is sent: that is the point of the test."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        s.sendall(head)
        for c in chunks:
            try:
                s.sendall(c)
            except (BrokenPipeError, ConnectionResetError):
                break
        data = b""
        while b"\r\n" not in data:
            part = s.recv(4096)
            if not part:
                break
            data += part
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None
    finally:
        s.close()
