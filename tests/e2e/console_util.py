"""Helpers for the console's tests: an App made through the GitHub stand-in's manifest
endpoints, jobs queued by signed deliveries, and "Sign in with GitHub" over plain HTTP (the
browser tests in tests/browser drive the same flow in Chromium)."""
import html
import http.client
import json
import os
import re
import time
import urllib.parse
import urllib.request

from server_util import examples, sign


def app_permissions():
    """deploy/app.yml's default_permissions: what a one-click registration asks for."""
    import yaml  # python3-yaml (scripts/bootstrap.sh)
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "app.yml")) as f:
        return yaml.safe_load(f)["default_permissions"]


def register_app(gh, console, permissions=None):
    """An App made through the stand-in's manifest endpoints (as /setup would), with
    deploy/app.yml's permissions unless others are given."""
    manifest = {"name": "autopatch", "redirect_url": console + "/setup/callback",
                "hook_attributes": {"url": "http://127.0.0.1:1/hook"},
                "default_permissions": app_permissions() if permissions is None
                else permissions}
    form = urllib.parse.urlencode({"manifest": json.dumps(manifest)}).encode()
    with urllib.request.urlopen(gh.url + "/settings/apps/new?state=x", data=form) as r:
        code = re.search(r'name="code" value="([^"]+)"', r.read().decode()).group(1)
    req = urllib.request.Request(f"{gh.url}/app-manifests/{code}/conversions", data=b"",
                                 method="POST")
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def register_through_setup(console):
    """/setup -> the stand-in's "new App" page -> its button -> /setup/callback, over plain
    HTTP: (status, body, Location) of the callback's answer."""
    with urllib.request.urlopen(f"{console}/setup") as r:
        page = r.read().decode()
    action = html.unescape(re.search(r'<form id="register" method="post" action="([^"]+)"',
                                     page).group(1))
    manifest = html.unescape(re.search(r'name="manifest" value="([^"]*)"', page).group(1))
    form = urllib.parse.urlencode({"manifest": manifest}).encode()
    with urllib.request.urlopen(action, data=form) as r:
        page = r.read().decode()
    code = re.search(r'name="code" value="([^"]+)"', page).group(1)
    state = re.search(r'name="state" value="([^"]+)"', page).group(1)
    url = urllib.parse.urlsplit(console)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request("GET", f"/setup/callback?code={code}&state={state}")
        r = conn.getresponse()
        return r.status, r.read().decode(), r.getheader("Location")
    finally:
        conn.close()


def queue_job(s, repo, issue, title=None):
    """Queue a job for repo#issue with a signed issues.labeled delivery (with the issue's
    title when given); its id."""
    p = next(e for e in examples("issues") if e["action"] == "labeled")  # a fresh copy
    p["repository"]["full_name"], p["repository"]["name"] = repo, repo.split("/")[1]
    p["installation"] = {"id": 1}
    p["sender"]["type"] = "User"
    p["label"] = {"name": "autopatch"}
    p["issue"]["number"] = issue
    if title is not None:
        p["issue"]["title"] = title
    body = json.dumps(p).encode()
    status, _, text = s.request("POST", "/api/github/webhooks", body, {
        "Content-Type": "application/json", "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": os.urandom(8).hex(), "X-Hub-Signature-256": sign(body)})
    assert status == 202, text
    return json.loads(text)["job"]


def _cookie(headers, name):
    for k, v in headers:
        if k.lower() == "set-cookie" and v.startswith(name + "="):
            return v.split(";", 1)[0].split("=", 1)[1]
    return None


class Visitor:
    """One browser's worth of the console over HTTP: a session cookie (or none)."""

    def __init__(self, admin):
        host, port = admin.rsplit(":", 1)
        self.host, self.port, self.sid = host, int(port), None

    def request(self, method, path, body=None, headers=None):
        """(status, headers, text)."""
        h = dict(headers or {})
        if self.sid:
            h["Cookie"] = f"ap_session={self.sid}"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            if path.endswith("/events") and r.status == 200:
                text = r.read1(4096).decode(errors="replace")  # a stream: its first bytes
            else:
                text = r.read().decode(errors="replace")
            return r.status, r.getheaders(), text
        finally:
            conn.close()

    def get(self, path):
        status, _, text = self.request("GET", path)
        return status, text

    def stream(self, path, seconds=1.5):
        """(status, text): what an event stream (or any page) sends within seconds."""
        h = {"Cookie": f"ap_session={self.sid}"} if self.sid else {}
        conn = http.client.HTTPConnection(self.host, self.port, timeout=seconds)
        text = b""
        try:
            conn.request("GET", path, headers=h)
            r = conn.getresponse()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    chunk = r.read1(65536)
                except (TimeoutError, OSError):
                    break
                if not chunk:
                    break
                text += chunk
            return r.status, text.decode(errors="replace")
        finally:
            conn.close()

    def csrf(self):
        """This session's CSRF token, from the sign-out form every page carries."""
        status, text = self.get("/")
        assert status == 200, text
        return re.search(r'name="csrf" value="([0-9a-f]{64})"', text).group(1)

    def post(self, path, csrf):
        status, _, text = self.request(
            "POST", path, body=f"csrf={csrf}",
            headers={"Content-Type": "application/x-www-form-urlencoded"})
        return status, text

    def sign_in(self, login):
        """/login -> the stand-in's authorize page -> "Sign in as LOGIN" -> /login/callback
        with the state cookie; keeps the session cookie. The callback's status."""
        status, headers, _ = self.request("GET", "/login")
        assert status == 303, status
        state = _cookie(headers, "ap_login")
        where = dict(headers)["Location"]
        with urllib.request.urlopen(where) as r:
            page = r.read().decode()
        link = html.unescape(re.search(rf'id="as-{login}" href="([^"]+)"', page).group(1))
        back = urllib.parse.urlsplit(link)
        status, headers, text = self.request("GET", f"{back.path}?{back.query}",
                                             headers={"Cookie": f"ap_login={state}"})
        self.sid = _cookie(headers, "ap_session")
        return status, text
