"""Helpers for the github/ end-to-end tests: App keys, the GitHub stand-in, a model stand-in.

The GitHub stand-in itself is standins/github_stub.py (importable; see its docstring).
"""
import json
import os
import pathlib
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from github_stub import GitHubStub  # noqa: F401  (re-exported for the tests)


def make_app_key(directory):
    """A fresh 2048-bit RSA App key (PKCS#1 PEM, as GitHub issues) and its public key."""
    d = pathlib.Path(directory)
    key, pub = d / "app.pem", d / "app.pub.pem"
    subprocess.run(["openssl", "genrsa", "-traditional", "-out", str(key), "2048"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                   check=True, capture_output=True)
    return key, pub


class ModelStub:
    """Answers GET /v1/models (OpenAI shape) when the Bearer key matches; 401 otherwise."""

    def __init__(self, key):
        expected = key

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                ok = self.headers.get("Authorization") == f"Bearer {expected}"
                body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}
                                  if ok else {"error": {"message": "Incorrect API key"}}).encode()
                self.send_response(200 if ok and self.path == "/v1/models" else
                                   401 if not ok else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.socket.settimeout(1.0)  # as in standins/model_stub.py: accept never hangs
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_autopatch(binary, args, env, cwd, timeout=60):
    """Run the binary with exactly env (plus PATH/HOME) from cwd (which has no .env)."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd)} | env
    return subprocess.run([str(binary), *args], env=full, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
