"""The Engine API client against a scripted stand-in daemon on a unix socket: version
negotiation (refuse below 1.41, cap at 1.44), the daemon's {"message"} in errors, and the
labels and hardening fields that reach the daemon."""
import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from sandbox_util import sandbox_factory  # noqa: F401


@pytest.fixture
def backend():
    """Docker Engine API client tests: the Docker backend only."""
    return "docker"


class FakeDaemon:
    def __init__(self, path, api_version):
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def address_string(self):
                return "unix"

            def log_message(self, *a):
                pass

            def _reply(self, status, body, headers=()):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                fake.requests.append((self.command, self.path, body))
                if self.path == "/_ping":
                    hdrs = [("Api-Version", api_version)] if api_version else []
                    self.send_response(200)
                    for k, v in hdrs:
                        self.send_header(k, v)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"OK")
                elif "/containers/json" in self.path or "/networks" in self.path:
                    self._reply(200, [])
                elif "/images/" in self.path and self.path.endswith("/json"):
                    # the image is inspected before a box is created (its VOLUMEs)
                    self._reply(200, {"Id": "sha256:" + "0" * 64, "Config": {"Volumes": None}})
                else:
                    self._reply(500, {"message": "fake daemon says no"})

            do_GET = do_POST = do_DELETE = do_HEAD = _handle

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.server = Server(str(path), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake(tmp_path):
    made = []

    def start(version):
        d = FakeDaemon(tmp_path / f"d{len(made)}.sock", version)
        made.append(d)
        return d, f"unix://{tmp_path}/d{len(made) - 1}.sock"

    yield start
    for d in made:
        d.close()


def test_refuses_an_api_older_than_1_41(sandbox_factory, fake):
    d, url = fake("1.40")
    r = sandbox_factory(extra_env={"DOCKER_HOST": url}).run("true", text=True)
    assert r.returncode == 125
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "1.40" in lines[0] and "1.41 or newer" in lines[0]
    assert [p for _, p, _ in d.requests] == ["/_ping"]  # nothing else was attempted


def test_caps_a_newer_api_and_surfaces_the_daemon_message(sandbox_factory, fake):
    d, url = fake("1.47")
    r = sandbox_factory(extra_env={"DOCKER_HOST": url}).run("true", text=True)
    assert r.returncode == 125
    assert "fake daemon says no" in r.stderr
    assert "500" in r.stderr
    creates = [(p, b) for m, p, b in d.requests if "/containers/create" in p]
    assert creates and all(p.startswith("/v1.44/") for p, _ in creates)
    body = json.loads(creates[0][1])
    hc = body["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"] and hc["Memory"] == hc["MemorySwap"]
    assert body["Labels"]["autopatch.owner"].startswith("t")
    assert body["User"] == "10001:10001"


def test_speaks_1_41_to_docker_20_10(sandbox_factory, fake):
    d, url = fake("1.41")
    sandbox_factory(extra_env={"DOCKER_HOST": url}).run("true", text=True)
    paths = [p for _, p, _ in d.requests if p != "/_ping"]
    assert paths and all(p.startswith("/v1.41/") for p in paths)


def test_a_daemon_without_a_version_is_refused(sandbox_factory, fake):
    d, url = fake(None)
    r = sandbox_factory(extra_env={"DOCKER_HOST": url}).run("true", text=True)
    assert r.returncode == 125
    assert "did not say its API version" in r.stderr


def test_tcp_docker_host_is_refused_clearly(sandbox_factory):
    r = sandbox_factory(extra_env={"DOCKER_HOST": "tcp://127.0.0.1:2375"}).run("true", text=True)
    assert r.returncode == 2
    assert "unix socket" in r.stderr
