#!/usr/bin/python3
"""A stand-in for GitHub's REST API and git smart HTTP, speaking GitHub's documented wire format.

It serves the parts of GitHub autopatch talks to, locally: `autopatch demo` runs it as the
demo's GitHub, and the tests (tests/github/, tests/e2e/, bench/pipeline) run it in place of
github.com. Standard library only. Requests are dispatched through route tables
(Handler.CONTROL, Handler.ROUTES, Handler.REPO_ROUTES).

Run it:
    /usr/bin/python3 standins/github_stub.py --port P --state-dir D \
        [--app-key-pub PUB.pem] [--app-id 1] [--seed seed.json]
or import it:
    from github_stub import GitHubStub
    stub = GitHubStub(state_dir, app_key_pub=pub, app_id="1").start()   # port 0 = any
    stub.seed_repo("octo/hello", source_dir="/path/to/tree",
                   issues=[{"title": "Crash", "body": "...", "labels": ["autopatch"]}])
    ... stub.url, stub.state(), stub.requests(), stub.fail(...) ...
    stub.stop()
GitHub Enterprise Server mode (`api_prefix="/api/v3"`, `--api-prefix /api/v3`): the REST API is
served only under the prefix (stub.url includes it; stub.web_url does not), while html_url and
clone_url (git smart HTTP) stay at the root of the same host, as on GHES. An API path without
the prefix, or git under it, answers 404. Recorded requests carry "path" without the prefix
and "full_path" as received.

What it serves (GitHub's documented request/response shapes and status codes):
  App (JWT, RS256 verified with `openssl dgst -sha256 -verify` against --app-key-pub; iat in
  the future → 401 "'Issued at' claim ...", exp > iat+600 → 401 "'Expiration time' claim ..."):
    GET  /app                                  GET /app/installations
    POST /app/installations/{id}/access_tokens GET /repos/{o}/{r}/installation
    (GET /app's "permissions" is the current App's: a manifest's default_permissions plus
    metadata read, or config app_permissions; an installation shows the App's unless it
    was configured with its own, like one whose owner has not accepted an update yet)
  Installation token ("Bearer ghs_..." or "token ghs_..."; bad or expired → 401 Bad credentials):
    GET  /repos/{o}/{r}
    GET  /repos/{o}/{r}/issues/{n}
    GET  /repos/{o}/{r}/issues/{n}/comments    (per_page/page, Link header)
    POST /repos/{o}/{r}/issues/{n}/comments    PATCH /repos/{o}/{r}/issues/comments/{id}
    POST /repos/{o}/{r}/issues/{n}/labels      DELETE /repos/{o}/{r}/issues/{n}/labels/{name}
    POST /repos/{o}/{r}/issues/{n}/reactions   POST /repos/{o}/{r}/issues/comments/{id}/reactions
    POST /repos/{o}/{r}/pulls (head must exist in the bare repo, else 422; one open PR per head)
    GET  /repos/{o}/{r}/pulls?head=owner:branch&state=open|closed|all
    GET|PATCH /repos/{o}/{r}/pulls/{n}         GET /repos/{o}/{r}/pulls/{n}/comments
  App registration from a manifest and "Sign in with GitHub" (web pages and their API):
    POST /settings/apps/new?state=S, POST /organizations/{org}/settings/apps/new?state=S
         (form field manifest): a "Create GitHub App" page whose button goes back to the
         manifest's redirect_url with ?code=C&state=S (a code works once, for an hour)
    POST /app-manifests/{code}/conversions (no auth): the new App (id, slug, pem,
         webhook_secret, client_id, client_secret, html_url); its key signs JWTs from now on
    GET  /apps/{slug}/installations/new        the installation page (HTML)
    GET  /login/oauth/authorize?client_id&redirect_uri&state: one "Sign in as LOGIN" button per
         configured user, back to redirect_uri with ?code&state
    POST /login/oauth/access_token (form: client_id, client_secret, code): {"access_token":
         "ghu_..."}, or {"error": "bad_verification_code"}
    GET  /user and GET /repos/{o}/{r} with a user token: the user, and the repository with
         permissions.push as configured ({"users": {"alice": {"push": ["o/r"]}}}); a
         repository the user has no access to is 404
    GET  /user/memberships/orgs/{org} with a user token: the user's membership (state
         "active", or "pending" for an invitation not yet accepted; role "member") as
         configured ({"users": {"alice": {"orgs": ["acme"], "pending_orgs": ["beta"]}}});
         an organization the user does not belong to is 404; 403 "Resource not accessible
         by integration" when the token's App (made from a manifest) lacks the organization
         permission Members (default_permissions "members"), as GitHub answers
  git smart HTTP through `git http-backend` at /{o}/{r}.git/... with Basic auth
  x-access-token:<issued token> (the repo's clone_url); refs/pull/N/head follows each open
  PR's head branch, as on GitHub.

Control endpoints (for tests; not part of GitHub):
  GET  /_stub/requests        every request received, in order (JSON list)
  POST /_stub/requests/clear  forget them
  GET  /_stub/state           repos, issues, comments, labels, reactions, PRs, tokens, pushes
  POST /_stub/fail            {"path": regex, "method": "POST"|null, "status": 503, "times": 1,
                               "retry_after": 1, "headers": {...}, "message": "...",
                               "body": {...}, "drop": false, "after": false} — answer matching
                               requests with that instead (drop: close the connection without
                               an answer); with "after": true the request is applied first and
                               only its answer is lost (GitHub did it, the client cannot tell)
  POST /_stub/fail/clear      forget every injected failure
  POST /_stub/config          {"token_ttl": s, "clock_offset": s, "app_id": "1",
                               "installations": [1, 2], "manifest_code_ttl": s,
                               "users": {"alice": {"push": ["o/r"], "see": ["o/r2"]}}}
  POST /_stub/seed            {"repos": [seed_repo kwargs ...]}
  POST /_stub/comments        {"repo": "o/r", "issue": 1, "count": 250} bulk comments
  POST /_stub/review_comments {"repo": "o/r", "pull": 2, "comments": [{"body","path","line"}]}
  POST /_stub/revoke          revoke every issued token (the next API call gets 401)
"""
import argparse
import base64
import collections
import datetime
import email.utils
import json
import os
import re
import secrets
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
DOCS = "https://docs.github.com/rest"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Seed",
    "GIT_AUTHOR_EMAIL": "seed@example.invalid",
    "GIT_COMMITTER_NAME": "Seed",
    "GIT_COMMITTER_EMAIL": "seed@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def iso(t):
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


class HttpError(Exception):
    def __init__(self, status, message, errors=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.errors, self.headers = status, message, errors, headers


def validation_failed(resource, field, code, message=None):
    err = {"resource": resource, "field": field, "code": code}
    if message:
        err["message"] = message
    return HttpError(422, "Validation Failed", [err])


class State:
    """Everything the stub knows; guarded by one lock."""

    def __init__(self, state_dir, app_id="1", app_key_pub=None, slug="autopatch"):
        self.lock = threading.RLock()
        self.dir = os.path.abspath(state_dir)
        self.git_root = os.path.join(self.dir, "git")
        os.makedirs(self.git_root, exist_ok=True)
        self.app_id = str(app_id)
        self.app_key_pub = app_key_pub
        self.slug = slug
        self.token_ttl = 3600
        self.clock_offset = 0
        self.installations = {1: {"id": 1, "account": None}}
        # GET /app's "permissions" for an App not made from a manifest (one made from a
        # manifest has its default_permissions); an installation has the App's unless it
        # was configured with its own (an owner who has not accepted an update yet).
        self.app_permissions = {"contents": "write", "issues": "write",
                                "pull_requests": "write", "metadata": "read"}
        self.tokens = {}
        self.repos = {}
        self.requests = []
        self.failures = []
        self.pushes = []
        self.next_id = 1000
        self.base_url = ""  # the web and git host (html_url, clone_url)
        self.api_prefix = ""  # "/api/v3": the REST API is served there (GHES), not at /
        self.manifest_codes = {}  # code -> {"manifest", "expires", "used"}
        self.manifest_code_ttl = 3600
        self.apps = []            # Apps created from manifests (secrets included)
        self.oauth_codes = {}     # code -> login
        self.user_tokens = {}     # ghu_ token -> login
        self.user_token_apps = {}  # ghu_ token -> the client_id of the App it was made for
        self.users = {}           # login -> {"push": [repo], "see": [repo], "orgs": [org],
                                  #           "pending_orgs": [org]}

    @property
    def api_url(self):
        """Where the REST API is: the web host, plus /api/v3 in GHES mode."""
        return self.base_url + self.api_prefix

    def current_app_permissions(self):
        """The permissions of the App in use, as GitHub's GET /app shows them: a dict of
        permission name -> "read" | "write" ("metadata": "read" always)."""
        app = next((a for a in self.apps if str(a["id"]) == self.app_id), None)
        if app is None:
            return dict(self.app_permissions)
        return dict({"metadata": "read"}, **app["manifest"].get("default_permissions", {}))

    def set_installations(self, entries):
        """A list of ids, or of {"id", "account" (login), "target_type", "permissions"}."""
        out = {}
        for e in entries:
            e = e if isinstance(e, dict) else {"id": e}
            i = int(e["id"])
            out[i] = dict(self.installations.get(i, {"id": i}))
            out[i].update(e)
            out[i]["id"] = i
        self.installations = out

    def now(self):
        return time.time() + self.clock_offset

    def new_id(self):
        with self.lock:
            self.next_id += 1
            return self.next_id

    def bot(self):
        return {"login": f"{self.slug}[bot]", "id": 9000, "type": "Bot"}

    # ---- seeding -------------------------------------------------------------------------
    def seed_repo(self, full_name, source_dir=None, files=None, default_branch="main",
                  issues=(), private=True, installation=1, branches=None):
        owner, name = full_name.split("/")
        bare = os.path.join(self.git_root, owner, name + ".git")
        if os.path.exists(bare):
            shutil.rmtree(bare)
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        env = dict(os.environ, **GIT_ENV)
        subprocess.run(["git", "init", "-q", "--bare", "-b", default_branch, bare],
                       check=True, env=env)
        with tempfile.TemporaryDirectory() as work:
            tree = os.path.join(work, "t")
            if source_dir:
                shutil.copytree(source_dir, tree, symlinks=True,
                                ignore=shutil.ignore_patterns(".git"))
            else:
                os.makedirs(tree)
            for path, content in (files or {}).items():
                p = os.path.join(tree, path)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as f:
                    f.write(content)
            if not os.listdir(tree):
                with open(os.path.join(tree, "README.md"), "w") as f:
                    f.write(f"# {name}\n")
            run = lambda *a: subprocess.run(["git", *a], cwd=tree, check=True, env=env,
                                            capture_output=True)
            run("init", "-q", "-b", default_branch)
            run("add", "-A")
            run("commit", "-q", "-m", "Initial commit")
            run("push", "-q", bare, f"HEAD:refs/heads/{default_branch}")
            for br in branches or ():
                run("push", "-q", bare, f"HEAD:refs/heads/{br}")
        with self.lock:
            inst = self.installations.setdefault(installation, {"id": installation})
            if not inst.get("account"):
                inst["account"] = {"login": owner, "id": self.new_id(), "type": "User"}
            repo = {
                "id": self.new_id(), "owner": owner, "name": name, "full_name": full_name,
                "private": private, "default_branch": default_branch, "bare": bare,
                "installation": installation, "issues": {}, "comments": {},
                "reactions": [], "pulls": {}, "review_comments": {}, "next_number": 1,
            }
            self.repos[full_name] = repo
            for issue in issues:
                self.add_issue(repo, **issue)
        return repo

    def add_issue(self, repo, title, body="", labels=(), number=None, user="octocat"):
        with self.lock:
            n = number or repo["next_number"]
            repo["next_number"] = max(repo["next_number"], n + 1)
            repo["issues"][n] = {
                "id": self.new_id(), "number": n, "title": title, "body": body,
                "state": "open", "labels": list(labels), "user": user,
                "created_at": iso(self.now()), "pull": None,
            }
            return repo["issues"][n]

    # ---- shapes --------------------------------------------------------------------------
    def user_obj(self, login):
        return {"login": login, "id": abs(hash(login)) % 100000, "type": "User",
                "html_url": f"https://github.invalid/{login}"}

    def repo_obj(self, repo):
        fn = repo["full_name"]
        return {
            "id": repo["id"], "node_id": f"R_{repo['id']}", "name": repo["name"],
            "full_name": fn, "private": repo["private"],
            "owner": self.user_obj(repo["owner"]),
            "html_url": f"{self.base_url}/{fn}", "url": f"{self.api_url}/repos/{fn}",
            "clone_url": f"{self.base_url}/{fn}.git", "default_branch": repo["default_branch"],
            "visibility": "private" if repo["private"] else "public",
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True,
                            "pull": True},
        }

    def label_obj(self, name):
        return {"id": abs(hash(name)) % 100000, "node_id": "LA_" + name, "name": name,
                "color": "ededed", "default": False, "description": None,
                "url": f"{self.api_url}/labels/{urllib.parse.quote(name)}"}

    def issue_obj(self, repo, issue):
        fn, n = repo["full_name"], issue["number"]
        obj = {
            "id": issue["id"], "node_id": f"I_{issue['id']}", "number": n,
            "title": issue["title"], "body": issue["body"] or None, "state": issue["state"],
            "labels": [self.label_obj(x) for x in issue["labels"]],
            "user": self.user_obj(issue["user"]), "created_at": issue["created_at"],
            "comments": sum(1 for c in repo["comments"].values() if c["issue"] == n),
            "html_url": f"{self.base_url}/{fn}/issues/{n}",
            "url": f"{self.api_url}/repos/{fn}/issues/{n}",
        }
        if issue["pull"]:
            obj["pull_request"] = {"url": f"{self.api_url}/repos/{fn}/pulls/{n}",
                                   "html_url": f"{self.base_url}/{fn}/pull/{n}"}
        return obj

    def comment_obj(self, repo, c):
        fn = repo["full_name"]
        return {
            "id": c["id"], "node_id": f"IC_{c['id']}", "body": c["body"], "user": c["user"],
            "html_url": f"{self.base_url}/{fn}/issues/{c['issue']}#issuecomment-{c['id']}",
            "issue_url": f"{self.api_url}/repos/{fn}/issues/{c['issue']}",
            "url": f"{self.api_url}/repos/{fn}/issues/comments/{c['id']}",
            "created_at": c["created_at"], "updated_at": c["updated_at"],
            "author_association": "NONE",
        }

    def branch_sha(self, repo, branch):
        out = subprocess.run(["git", "--git-dir", repo["bare"], "rev-parse", "--verify", "-q",
                              f"refs/heads/{branch}^{{commit}}"], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    def sync_pull_refs(self, repo):
        """GitHub keeps refs/pull/N/head at each open PR's head; so does the stand-in."""
        with self.lock:
            pulls = [(p["number"], p["head"]) for p in repo["pulls"].values()
                     if p["state"] == "open"]
        for n, head in pulls:
            sha = self.branch_sha(repo, head)
            if sha:
                subprocess.run(["git", "--git-dir", repo["bare"], "update-ref",
                                f"refs/pull/{n}/head", sha], capture_output=True)

    def pull_obj(self, repo, p):
        fn, n = repo["full_name"], p["number"]
        side = lambda ref, sha: {"ref": ref, "sha": sha, "label": f"{repo['owner']}:{ref}",
                                 "repo": self.repo_obj(repo), "user": self.user_obj(repo["owner"])}
        head_sha = self.branch_sha(repo, p["head"]) or p["head_sha"]
        return {
            "id": p["id"], "node_id": f"PR_{p['id']}", "number": n, "state": p["state"],
            "title": p["title"], "body": p["body"], "draft": p["draft"],
            "maintainer_can_modify": p["maintainer_can_modify"], "merged": False,
            "user": self.bot(), "created_at": p["created_at"],
            "html_url": f"{self.base_url}/{fn}/pull/{n}",
            "url": f"{self.api_url}/repos/{fn}/pulls/{n}",
            "head": side(p["head"], head_sha),
            "base": side(p["base"], self.branch_sha(repo, p["base"])),
        }

    def dump(self):
        with self.lock:
            repos = {}
            for fn, r in self.repos.items():
                repos[fn] = {
                    "bare": r["bare"], "default_branch": r["default_branch"],
                    "issues": {str(n): {"title": i["title"], "body": i["body"],
                                        "state": i["state"], "labels": i["labels"],
                                        "pull": bool(i["pull"])}
                               for n, i in r["issues"].items()},
                    "comments": [self.comment_obj(r, c) | {"issue": c["issue"]}
                                 for c in r["comments"].values()],
                    "reactions": r["reactions"],
                    "pulls": [self.pull_obj(r, p) for p in r["pulls"].values()],
                }
            return {"repos": repos, "tokens_issued": len(self.tokens),
                    "installations": list(self.installations.values()),
                    "pushes": self.pushes, "app_id": self.app_id}


Request = collections.namedtuple("Request", "path qs query body")  # qs: the raw query string


def routes(*entries):
    """A route table: (method or None for any, compiled pattern, handler) entries."""
    return [(method, re.compile(pattern), handler) for method, pattern, handler in entries]


def route(table, method, path):
    """(handler, match) of the first entry of table that matches; else 404, as GitHub says."""
    for want, pattern, handler in table:
        m = pattern.match(path) if want in (None, method) else None
        if m:
            return handler, m
    raise HttpError(404, "Not Found")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "GitHub.com-stub"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet; the request log is /_stub/requests
        pass

    def date_time_string(self, timestamp=None):
        return email.utils.formatdate(self.server.state.now(), usegmt=True)

    @property
    def st(self):
        return self.server.state

    # ---- plumbing ------------------------------------------------------------------------
    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, obj=None, headers=None, raw=None, ctype="application/json; charset=utf-8"):
        data = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        hdrs = {"X-GitHub-Request-Id": secrets.token_hex(8).upper(),
                "X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999",
                "X-RateLimit-Reset": str(int(self.st.now()) + 3600),
                "X-RateLimit-Resource": "core"}
        given = {k.lower(): (k, v) for k, v in (headers or {}).items()}
        hdrs = {k: v for k, v in hdrs.items() if k.lower() not in given}
        hdrs.update({k: v for k, v in given.values()})
        for k, v in hdrs.items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error_json(self, e):
        body = {"message": e.message, "documentation_url": DOCS, "status": str(e.status)}
        if e.errors is not None:
            body["errors"] = e.errors
        self.send(e.status, body, e.headers)

    def do_GET(self):
        self.dispatch()

    do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = do_GET

    def dispatch(self):
        u = urllib.parse.urlsplit(self.path)
        req = Request(u.path, u.query, urllib.parse.parse_qs(u.query), self.read_body())
        if self.st.api_prefix and req.path.startswith(self.st.api_prefix + "/_stub/"):
            req = req._replace(path=req.path[len(self.st.api_prefix):])
        try:
            if req.path.startswith("/_stub/"):
                data = json.loads(req.body) if req.body else {}
                handler, _ = route(self.CONTROL, self.command, req.path)
                return handler(self, data)
            full_path, req = req.path, self.strip_api_prefix(req)
            self.record(req.path, req.qs, req.body, full_path)
            f = self.take_failure(req.path)
            if f and f.get("after"):
                return self.apply_then_fail(f, req)
            if f:
                return self.send_failure(f)
            handler, m = route(self.ROUTES, self.command, req.path)
            handler(self, m, req)
        except HttpError as e:
            self.send_error_json(e)
        except Exception as e:  # a stub bug must be visible to the test, as a 500
            import traceback
            traceback.print_exc()
            self.send(500, {"message": f"stub error: {e!r}", "documentation_url": DOCS})

    def strip_api_prefix(self, req):
        """GHES mode: the API only under the prefix (the prefix is removed for routing), git
        and the web pages (new App, installation, OAuth) only outside it; an API path without
        the prefix, or a web path under it, is a 404."""
        prefix = self.st.api_prefix
        if not prefix:
            return req
        def web(p):
            return bool(re.match(self.GIT_PATH, p) or re.match(self.WEB_PATH, p))
        is_git = web(req.path)
        if req.path.startswith(prefix + "/"):
            inner = req.path[len(prefix):]
            if not web(inner):
                return req._replace(path=inner)
        elif is_git:
            return req
        return req._replace(path="/_not_found_in_ghes_mode" + req.path)

    def record(self, path, query, body, full_path=None):
        auth = self.headers.get("Authorization", "")
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        with self.st.lock:
            self.st.requests.append({
                "method": self.command, "path": path, "full_path": full_path or path,
                "query": query,
                "time": time.time(),
                "auth_scheme": auth.split(" ")[0] if auth else None,
                "auth": auth,
                "headers": {k.lower(): v for k, v in self.headers.items()
                            if k.lower() != "authorization"},
                "body": parsed if parsed is not None else (
                    body.decode("utf-8", "replace") if body and len(body) < 4096 else None),
            })

    def take_failure(self, path):
        """The injected failure this request meets (its count taken), else None."""
        with self.st.lock:
            for f in self.st.failures:
                if f["times"] <= 0:
                    continue
                if f.get("method") and f["method"] != self.command:
                    continue
                if not re.search(f["path"], path):
                    continue
                f["times"] -= 1
                return f
        return None

    def apply_then_fail(self, f, req):
        """An "after" failure: GitHub applied the request, then its answer was lost."""
        self.send = lambda *a, **kw: None  # the real answer goes nowhere
        try:
            handler, m = route(self.ROUTES, self.command, req.path)
            handler(self, m, req)
        except HttpError:
            pass
        finally:
            del self.send
        return self.send_failure(f)

    def send_failure(self, f):
        if f.get("drop"):
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        headers = dict(f.get("headers") or {})
        if f.get("retry_after") is not None:
            headers["Retry-After"] = str(f["retry_after"])
        body = f.get("body") or {"message": f.get("message") or {
            403: "You have exceeded a secondary rate limit. Please wait a few minutes "
                 "before you try again.",
            429: "You have exceeded a secondary rate limit.",
        }.get(f["status"], "Server Error"), "documentation_url": DOCS}
        self.send(f["status"], body, headers)

    # ---- control (CONTROL routes: handler(self, data), data = the parsed JSON body) ------
    def stub_requests(self, data):
        with self.st.lock:
            return self.send(200, self.st.requests)

    def stub_requests_clear(self, data):
        with self.st.lock:
            self.st.requests.clear()
        return self.send(204)

    def stub_state(self, data):
        return self.send(200, self.st.dump())

    def stub_health(self, data):
        return self.send(200, {"ok": True})

    def stub_fail_clear(self, data):
        with self.st.lock:
            self.st.failures.clear()
        return self.send(204)

    def stub_fail(self, data):
        f = {"times": 1, "status": 503} | data
        with self.st.lock:
            self.st.failures.append(f)
        return self.send(201, f)

    def stub_config(self, data):
        st = self.st
        with st.lock:
            for k in ("token_ttl", "clock_offset", "app_id", "slug", "manifest_code_ttl",
                      "users"):
                if k in data:
                    setattr(st, k, str(data[k]) if k == "app_id" else data[k])
            if "app_permissions" in data:
                st.app_permissions = dict(data["app_permissions"])
            if "installations" in data:  # a list of ids or objects; [] = installed nowhere
                st.set_installations(data["installations"])
        return self.send(200, {"ok": True})

    def stub_seed(self, data):
        for r in data.get("repos", []):
            self.st.seed_repo(**r)
        return self.send(201, {"ok": True})

    def stub_comments(self, data):
        st = self.st
        repo = st.repos[data["repo"]]
        for i in range(int(data.get("count", 1))):
            self.new_comment(repo, int(data["issue"]),
                             f"{data.get('body_prefix', 'comment')} {i + 1}",
                             st.user_obj(data.get("user", "octocat")))
        return self.send(201, {"ok": True})

    def stub_review_comments(self, data):
        st = self.st
        repo = st.repos[data["repo"]]
        with st.lock:
            lst = repo["review_comments"].setdefault(int(data["pull"]), [])
            for c in data.get("comments", []):
                cid = st.new_id()
                lst.append({"id": cid, "body": c["body"], "path": c.get("path", ""),
                            "line": c.get("line"), "side": "RIGHT",
                            "user": st.user_obj(c.get("user", "octocat")),
                            "pull_request_review_id": cid + 1,
                            "html_url": f"{st.base_url}/{data['repo']}/pull/"
                                        f"{data['pull']}#discussion_r{cid}"})
        return self.send(201, {"ok": True})

    def stub_revoke(self, data):
        with self.st.lock:
            self.st.tokens.clear()
        return self.send(204)

    # ---- auth ----------------------------------------------------------------------------
    def bearer(self):
        auth = self.headers.get("Authorization", "")
        parts = auth.split(" ", 1)
        if len(parts) != 2 or parts[0].lower() not in ("bearer", "token"):
            return None
        return parts[1].strip()

    def require_jwt(self):
        tok = self.bearer()
        if not tok or tok.count(".") != 2:
            raise HttpError(401, "A JSON web token could not be decoded")
        h64, c64, s64 = tok.split(".")
        try:
            header = json.loads(b64url_decode(h64))
            claims = json.loads(b64url_decode(c64))
            sig = b64url_decode(s64)
        except ValueError:
            raise HttpError(401, "A JSON web token could not be decoded")
        if header.get("alg") != "RS256":
            raise HttpError(401, "A JSON web token could not be decoded")
        if self.st.app_key_pub and not verify_rs256(self.st.app_key_pub,
                                                    f"{h64}.{c64}".encode(), sig):
            raise HttpError(401, "A JSON web token could not be decoded")
        now = self.st.now()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or iat > now + 5:
            raise HttpError(401, "'Issued at' claim ('iat') must be an Integer representing "
                                 "a time in the past.")
        if not isinstance(exp, int) or exp <= now:
            raise HttpError(401, "'Expiration time' claim ('exp') must be a numeric value "
                                 "representing the future time at which the assertion expires.")
        if exp > iat + 600 or exp > now + 600 + 5:
            raise HttpError(401, "'Expiration time' claim ('exp') is too far in the future.")
        if str(claims.get("iss")) != self.st.app_id:
            raise HttpError(401, "A JSON web token could not be decoded")
        return claims

    def require_token(self, repo=None):
        tok = self.bearer()
        with self.st.lock:
            info = self.st.tokens.get(tok) if tok else None
        if not info or info["expires"] <= self.st.now():
            raise HttpError(401, "Bad credentials")
        if repo is not None and repo["installation"] != info["inst"]:
            raise HttpError(404, "Not Found")
        return info

    # ---- REST ----------------------------------------------------------------------------
    def repo_or_404(self, owner, name):
        repo = self.st.repos.get(f"{owner}/{name}")
        if not repo:
            self.require_token()
            raise HttpError(404, "Not Found")
        return repo

    def issue_or_404(self, repo, n):
        issue = repo["issues"].get(int(n))
        if not issue:
            raise HttpError(404, "Not Found")
        return issue

    def json_body(self, body):
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            raise HttpError(400, "Problems parsing JSON")
        return data

    def paginate(self, items, query, path):
        try:
            per_page = min(max(int(query.get("per_page", ["30"])[0]), 1), 100)
            page = max(int(query.get("page", ["1"])[0]), 1)
        except ValueError:
            per_page, page = 30, 1
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        q = {k: v[0] for k, v in query.items() if k not in ("page", "per_page")}

        def url(p):
            return (f"{self.st.api_url}{path}?"
                    + urllib.parse.urlencode(q | {"per_page": per_page, "page": p}))
        if page < last:
            links.append(f'<{url(page + 1)}>; rel="next"')
            links.append(f'<{url(last)}>; rel="last"')
        if page > 1:
            links.append(f'<{url(1)}>; rel="first"')
            links.append(f'<{url(page - 1)}>; rel="prev"')
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def new_comment(self, repo, number, body, user):
        st = self.st
        with st.lock:
            self.issue_or_404(repo, number)
            cid = st.new_id()
            c = {"id": cid, "issue": number, "body": body, "user": user,
                 "created_at": iso(st.now()), "updated_at": iso(st.now())}
            repo["comments"][cid] = c
            return c

    def pull_or_404(self, repo, n):
        p = repo["pulls"].get(int(n))
        if not p:
            raise HttpError(404, "Not Found")
        return p


    # ---- App manifest flow and OAuth sign-in (web pages + their API) ---------------------
    def user_login(self):
        tok = self.bearer()
        with self.st.lock:
            return self.st.user_tokens.get(tok) if tok else None

    def html(self, status, body, headers=None):
        page = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<title>GitHub stand-in</title></head><body>" + body + "</body></html>")
        return self.send(status, raw=page.encode(), headers=headers,
                         ctype="text/html; charset=utf-8")

    def new_app_page(self, m, req):
        st = self.st
        form = urllib.parse.parse_qs(req.body.decode("utf-8", "replace"))
        state = (req.query.get("state") or [""])[0]
        try:
            manifest = json.loads(form.get("manifest", [""])[0])
        except ValueError:
            return self.html(422, "<h1>Invalid manifest</h1>")
        code = "mc_" + secrets.token_hex(10)
        with st.lock:
            st.manifest_codes[code] = {"manifest": manifest, "org": m.group(1),
                                       "expires": st.now() + float(st.manifest_code_ttl),
                                       "used": False}
        esc = lambda v: (str(v).replace("&", "&amp;").replace('"', "&quot;")
                         .replace("<", "&lt;"))
        return self.html(200, (
            f"<h1>Create GitHub App</h1><p>Name: <b id=\"app-name\">{esc(manifest.get('name'))}"
            f"</b></p><p>Webhook URL: <code id=\"hook-url\">"
            f"{esc((manifest.get('hook_attributes') or {}).get('url'))}</code></p>"
            f"<form method=\"get\" action=\"{esc(manifest.get('redirect_url'))}\">"
            f"<input type=\"hidden\" name=\"code\" value=\"{code}\">"
            f"<input type=\"hidden\" name=\"state\" value=\"{esc(state)}\">"
            f"<button id=\"create\" type=\"submit\">Create GitHub App for "
            f"{esc(m.group(1) or 'your account')}</button></form>"))

    def manifest_conversion(self, m, req):
        st = self.st
        with st.lock:
            entry = st.manifest_codes.get(m.group(1))
            if not entry or entry["used"] or entry["expires"] <= st.now():
                raise HttpError(404, "Not Found")
            entry["used"] = True
        d = os.path.join(st.dir, "apps", m.group(1))
        os.makedirs(d, exist_ok=True)
        key, pub = os.path.join(d, "key.pem"), os.path.join(d, "pub.pem")
        subprocess.run(["openssl", "genrsa", "-traditional", "-out", key, "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", key, "-pubout", "-out", pub], check=True,
                       capture_output=True)
        manifest = entry["manifest"]
        with st.lock:
            app_id = st.new_id()
            slug = re.sub(r"[^a-z0-9-]", "-", str(manifest.get("name", "app")).lower())
            app = {"id": app_id, "slug": slug, "node_id": f"A_{app_id}",
                   "name": manifest.get("name"), "owner": st.user_obj(entry["org"] or "octo"),
                   "html_url": f"{st.base_url}/apps/{slug}",
                   "client_id": "Iv1." + secrets.token_hex(8),
                   "client_secret": secrets.token_hex(20),
                   "webhook_secret": secrets.token_hex(20),
                   "pem": open(key).read(), "manifest": manifest,
                   "created_at": iso(st.now()), "updated_at": iso(st.now())}
            st.apps.append(app)
            st.app_id, st.app_key_pub, st.slug = str(app_id), pub, slug
        out = {k: v for k, v in app.items() if k != "manifest"}
        out["permissions"] = manifest.get("default_permissions", {})
        out["events"] = manifest.get("default_events", [])
        return self.send(201, out)

    def install_page(self, m, req):
        return self.html(200, f"<h1 id=\"install\">Install {m.group(1)}</h1>"
                              "<p>Choose where to install the App.</p>")

    def oauth_authorize(self, m, req):
        st = self.st
        q = {k: v[0] for k, v in req.query.items()}
        if not any(a["client_id"] == q.get("client_id") for a in st.apps):
            return self.html(404, "<h1>Unknown OAuth application</h1>")
        buttons = []
        for login in sorted(st.users):
            code = "oc_" + secrets.token_hex(10)
            with st.lock:
                st.oauth_codes[code] = {"login": login, "client_id": q.get("client_id")}
            target = q.get("redirect_uri", "") + "?" + urllib.parse.urlencode(
                {"code": code, "state": q.get("state", "")})
            buttons.append(f"<li><a id=\"as-{login}\" href=\"{target.replace('&', '&amp;')}\">"
                           f"Sign in as {login}</a></li>")
        return self.html(200, "<h1>Sign in to GitHub</h1><ul>" + "".join(buttons) + "</ul>")

    def oauth_token(self, m, req):
        st = self.st
        form = {k: v[0] for k, v in urllib.parse.parse_qs(req.body.decode()).items()}
        with st.lock:
            entry = st.oauth_codes.pop(form.get("code", ""), None)
            app = next((a for a in st.apps if a["client_id"] == form.get("client_id")), None)
        if not app or app["client_secret"] != form.get("client_secret"):
            return self.send(200, {"error": "incorrect_client_credentials",
                                   "error_description": "The client_id and/or client_secret "
                                                        "passed are incorrect."})
        if not entry or entry["client_id"] != app["client_id"]:
            return self.send(200, {"error": "bad_verification_code",
                                   "error_description": "The code passed is incorrect or "
                                                        "expired."})
        tok = "ghu_" + secrets.token_hex(18)
        with st.lock:
            st.user_tokens[tok] = entry["login"]
            st.user_token_apps[tok] = app["client_id"]
        return self.send(200, {"access_token": tok, "token_type": "bearer", "scope": ""})

    def get_user(self, m, req):
        login = self.user_login()
        if login is None:
            raise HttpError(401, "Requires authentication")
        return self.send(200, self.st.user_obj(login))

    def get_org_membership(self, m, req):
        """GitHub's "Get an organization membership for the authenticated user": 200 with the
        membership for an active or pending member, 404 for anyone else."""
        st = self.st
        login = self.user_login()
        if login is None:
            raise HttpError(401, "Requires authentication")
        org = m.group(1)
        # A GitHub App's user token reads memberships only with the organization permission
        # Members (read), as GitHub answers: 403 "Resource not accessible by integration".
        with st.lock:
            client = st.user_token_apps.get(self.bearer())
            app = next((a for a in st.apps if a["client_id"] == client), None)
        if app is not None and \
                "members" not in app["manifest"].get("default_permissions", {}):
            raise HttpError(403, "Resource not accessible by integration")
        user = st.users.get(login, {})
        pending = org.lower() in [o.lower() for o in user.get("pending_orgs", [])]
        if not pending and org.lower() not in [o.lower() for o in user.get("orgs", [])]:
            raise HttpError(404, "Not Found")
        api = st.api_url
        return self.send(200, {
            "url": f"{api}/orgs/{org}/memberships/{login}",
            "state": "pending" if pending else "active", "role": "member",
            "organization_url": f"{api}/orgs/{org}",
            "organization": {"login": org, "id": 9000 + len(org), "node_id": f"O_{org}",
                             "url": f"{api}/orgs/{org}", "description": None},
            "user": st.user_obj(login)})

    # ---- App endpoints, JWT (ROUTES: handler(self, m, req)) ------------------------------
    def get_app(self, m, req):
        st = self.st
        self.require_jwt()
        with st.lock:
            perms = st.current_app_permissions()
        return self.send(200, {"id": int(st.app_id) if st.app_id.isdigit() else 1,
                               "slug": st.slug, "name": st.slug, "owner": st.user_obj("octo"),
                               "permissions": perms,
                               "events": ["issues", "issue_comment"]})

    def list_installations(self, m, req):
        st = self.st
        self.require_jwt()
        def account(i):
            a = i.get("account")
            if isinstance(a, str):
                return dict(st.user_obj(a), type=i.get("target_type", "User"))
            return a or st.user_obj("octo")

        with st.lock:
            perms = st.current_app_permissions()
            lst = [{"id": i["id"], "app_id": st.app_id,
                    "target_type": i.get("target_type", "User"), "account": account(i),
                    "permissions": i.get("permissions", perms)}
                   for i in st.installations.values()]
        return self.send(200, lst)

    def create_token(self, m, req):
        st = self.st
        self.require_jwt()
        inst = int(m.group(1))
        if inst not in st.installations:
            raise HttpError(404, "Not Found")
        alphabet = string.ascii_letters + string.digits
        tok = "ghs_" + "".join(secrets.choice(alphabet) for _ in range(36))
        expires = st.now() + float(st.token_ttl)
        with st.lock:
            st.tokens[tok] = {"inst": inst, "expires": expires, "issued": st.now()}
        return self.send(201, {"token": tok, "expires_at": iso(expires),
                               "permissions": {"contents": "write", "issues": "write",
                                               "pull_requests": "write"},
                               "repository_selection": "all"})

    def get_repo_installation(self, m, req):
        st = self.st
        self.require_jwt()
        owner, name = m.group(1), m.group(2)
        repo = st.repos.get(f"{owner}/{name}")
        if not repo:
            raise HttpError(404, "Not Found")
        return self.send(200, {"id": repo["installation"], "app_id": st.app_id,
                               "account": st.user_obj(owner)})

    def repo_api(self, m, req):
        """/repos/{o}/{r}[/rest]: the installation token first (401 / 404 before any route
        is looked at, as on GitHub), then REPO_ROUTES on the rest of the path."""
        owner, name, rest = m.group(1), m.group(2), m.group(3) or ""
        login = self.user_login()
        if login is not None:  # a user's token: what that user may see, nothing else
            user = self.st.users.get(login, {})
            fn = f"{owner}/{name}"
            repo = self.st.repos.get(fn)
            push = fn in user.get("push", [])
            if not repo or rest or self.command != "GET" or not (push or fn in user.get("see", [])):
                raise HttpError(404, "Not Found")
            obj = self.st.repo_obj(repo)
            obj["permissions"] = {"admin": False, "maintain": False, "push": push,
                                  "triage": push, "pull": True}
            return self.send(200, obj)
        repo = self.repo_or_404(owner, name)
        self.require_token(repo)
        handler, m = route(self.REPO_ROUTES, self.command, rest)
        return handler(self, repo, m, req)

    # ---- repository endpoints, installation token (REPO_ROUTES: handler(self, repo, m, req))
    def get_repo(self, repo, m, req):
        return self.send(200, self.st.repo_obj(repo))

    def get_issue(self, repo, m, req):
        return self.send(200, self.st.issue_obj(repo, self.issue_or_404(repo, m.group(1))))

    def list_comments(self, repo, m, req):
        st = self.st
        n = int(m.group(1))
        self.issue_or_404(repo, n)
        with st.lock:
            items = [st.comment_obj(repo, c) for c in repo["comments"].values()
                     if c["issue"] == n]
        chunk, hdrs = self.paginate(items, req.query, req.path)
        return self.send(200, chunk, hdrs)

    def create_comment(self, repo, m, req):
        st = self.st
        data = self.json_body(req.body)
        if not isinstance(data.get("body"), str):
            raise validation_failed("IssueComment", "body", "missing_field")
        c = self.new_comment(repo, int(m.group(1)), data["body"], st.bot())
        return self.send(201, st.comment_obj(repo, c))

    def update_comment(self, repo, m, req):
        st = self.st
        data = self.json_body(req.body)
        if not isinstance(data.get("body"), str):
            raise validation_failed("IssueComment", "body", "missing_field")
        with st.lock:
            c = repo["comments"].get(int(m.group(1)))
            if not c:
                raise HttpError(404, "Not Found")
            c["body"], c["updated_at"] = data["body"], iso(st.now())
        return self.send(200, st.comment_obj(repo, c))

    def add_labels(self, repo, m, req):
        st = self.st
        issue = self.issue_or_404(repo, m.group(1))
        data = self.json_body(req.body)
        names = data if isinstance(data, list) else data.get("labels")
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise validation_failed("Label", "labels", "invalid")
        with st.lock:
            for x in names:
                if x not in issue["labels"]:
                    issue["labels"].append(x)
            return self.send(200, [st.label_obj(x) for x in issue["labels"]])

    def remove_label(self, repo, m, req):
        st = self.st
        issue = self.issue_or_404(repo, m.group(1))
        label = urllib.parse.unquote(m.group(2))
        with st.lock:
            if label not in issue["labels"]:
                raise HttpError(404, "Label does not exist")
            issue["labels"].remove(label)
            return self.send(200, [st.label_obj(x) for x in issue["labels"]])

    def add_reaction(self, repo, m, req):
        st = self.st
        data = self.json_body(req.body)
        content = data.get("content")
        if content not in REACTIONS:
            raise validation_failed("Reaction", "content", "invalid")
        kind = "comment" if m.group(1) else "issue"
        target = int(m.group(2))
        with st.lock:
            if kind == "issue":
                self.issue_or_404(repo, target)
            elif target not in repo["comments"]:
                raise HttpError(404, "Not Found")
            for r in repo["reactions"]:
                if (r["kind"], r["target"], r["content"]) == (kind, target, content):
                    return self.send(200, r["obj"])
            obj = {"id": st.new_id(), "node_id": "REA_x", "content": content,
                   "user": st.bot(), "created_at": iso(st.now())}
            repo["reactions"].append({"kind": kind, "target": target, "content": content,
                                      "obj": obj})
        return self.send(201, obj)

    def list_pulls(self, repo, m, req):
        st = self.st
        state = req.query.get("state", ["open"])[0]
        head = req.query.get("head", [None])[0]
        with st.lock:
            pulls = sorted(repo["pulls"].values(), key=lambda p: -p["number"])
            items = [st.pull_obj(repo, p) for p in pulls
                     if (state == "all" or p["state"] == state)
                     and (not head or f"{repo['owner']}:{p['head']}" == head
                          or (":" not in head and p["head"] == head))]
        chunk, hdrs = self.paginate(items, req.query, req.path)
        return self.send(200, chunk, hdrs)

    def get_pull(self, repo, m, req):
        return self.send(200, self.st.pull_obj(repo, self.pull_or_404(repo, m.group(1))))

    def update_pull(self, repo, m, req):
        st = self.st
        p = self.pull_or_404(repo, m.group(1))
        data = self.json_body(req.body)
        if "state" in data and data["state"] not in ("open", "closed"):
            raise validation_failed("PullRequest", "state", "invalid")
        with st.lock:
            for k in ("title", "body", "state", "maintainer_can_modify"):
                if k in data:
                    p[k] = data[k]
            repo["issues"][p["number"]]["state"] = p["state"]
        return self.send(200, st.pull_obj(repo, p))

    def list_review_comments(self, repo, m, req):
        st = self.st
        n = int(m.group(1))
        if n not in repo["pulls"]:
            raise HttpError(404, "Not Found")
        with st.lock:
            items = list(repo["review_comments"].get(n, []))
        chunk, hdrs = self.paginate(items, req.query, req.path)
        return self.send(200, chunk, hdrs)

    def create_pull(self, repo, m, req):
        st = self.st
        data = self.json_body(req.body)
        title, head, base = data.get("title"), data.get("head"), data.get("base")
        if not isinstance(base, str) or not base:
            raise validation_failed("PullRequest", "base", "missing_field")
        if not isinstance(head, str) or not head:
            raise validation_failed("PullRequest", "head", "missing_field")
        if not isinstance(title, str) or not title:
            raise validation_failed("PullRequest", "title", "missing_field")
        if ":" in head:
            howner, head = head.split(":", 1)
            if howner != repo["owner"]:
                raise validation_failed("PullRequest", "head", "invalid")
        head_sha, base_sha = st.branch_sha(repo, head), st.branch_sha(repo, base)
        if not head_sha:
            raise validation_failed("PullRequest", "head", "invalid")
        if not base_sha:
            raise validation_failed("PullRequest", "base", "invalid")
        with st.lock:
            for p in repo["pulls"].values():
                if p["head"] == head and p["state"] == "open":
                    raise validation_failed(
                        "PullRequest", None, "custom",
                        f"A pull request already exists for {repo['owner']}:{head}.")
            if head_sha == base_sha:
                raise validation_failed("PullRequest", None, "custom",
                                        f"No commits between {base} and {head}")
            issue = st.add_issue(repo, title, data.get("body") or "", user=st.bot()["login"])
            p = {"id": st.new_id(), "number": issue["number"], "state": "open",
                 "title": title, "body": data.get("body"), "head": head, "base": base,
                 "head_sha": head_sha, "draft": bool(data.get("draft", False)),
                 "maintainer_can_modify": bool(data.get("maintainer_can_modify", False)),
                 "created_at": iso(st.now())}
            issue["pull"] = p["number"]
            repo["pulls"][p["number"]] = p
        self.st.sync_pull_refs(repo)
        return self.send(201, st.pull_obj(repo, p))

    # ---- git smart HTTP ------------------------------------------------------------------
    def git(self, m, req):
        owner, name, service_path = m.groups()
        query, body = req.qs, req.body
        repo = self.st.repos.get(f"{owner}/{name}")
        write = service_path == "git-receive-pack" or "service=git-receive-pack" in query
        user = None
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("basic "):
            try:
                user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                user = pw = None
            with self.st.lock:
                info = self.st.tokens.get(pw)
            ok = (user == "x-access-token" and info and info["expires"] > self.st.now()
                  and repo and repo["installation"] == info["inst"])
            if not ok:
                user = None
                return self.send(401, raw=b"Invalid username or password.\n",
                                 ctype="text/plain",
                                 headers={"WWW-Authenticate": 'Basic realm="GitHub"'})
        if not repo or (user is None and (write or repo["private"])):
            return self.send(401, raw=b"", ctype="text/plain",
                             headers={"WWW-Authenticate": 'Basic realm="GitHub"'})
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.st.git_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "PATH_INFO": f"/{owner}/{name}.git/{service_path}",
            "REQUEST_METHOD": self.command,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
        }
        if user:
            env["REMOTE_USER"] = user
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        before = self.refs(repo) if service_path == "git-receive-pack" else None
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, timeout=120)
        head, sep, payload = out.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = out.stdout.partition(b"\n\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers[k.strip()] = v.strip()
        ctype = headers.pop("Content-Type", "application/octet-stream")
        headers.pop("Content-Length", None)
        if before is not None:
            self.st.sync_pull_refs(repo)
            after = self.refs(repo)
            with self.st.lock:
                self.st.pushes.append({"repo": repo["full_name"], "user": user,
                                       "changed": {k: v for k, v in after.items()
                                                   if before.get(k) != v}})
        self.send(status, raw=payload, ctype=ctype, headers=headers)

    def refs(self, repo):
        out = subprocess.run(["git", "--git-dir", repo["bare"], "for-each-ref",
                              "--format=%(refname) %(objectname)"], capture_output=True,
                             text=True)
        return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)

    # ---- routes --------------------------------------------------------------------------
    # (method, pattern, handler): the first entry whose method (None = any) and pattern match
    # answers; none matches -> 404 (route()). Control endpoints are neither recorded nor
    # subject to injected failures; everything else is both, before routing.
    CONTROL = routes(
        ("GET", r"^/_stub/requests$", stub_requests),
        (None, r"^/_stub/requests/clear$", stub_requests_clear),
        (None, r"^/_stub/state$", stub_state),
        (None, r"^/_stub/health$", stub_health),
        (None, r"^/_stub/fail/clear$", stub_fail_clear),
        (None, r"^/_stub/fail$", stub_fail),
        (None, r"^/_stub/config$", stub_config),
        (None, r"^/_stub/seed$", stub_seed),
        (None, r"^/_stub/comments$", stub_comments),
        (None, r"^/_stub/review_comments$", stub_review_comments),
        (None, r"^/_stub/revoke$", stub_revoke),
    )
    # git smart HTTP at each repo's clone_url, passed through to `git http-backend`
    GIT_PATH = (r"^/(?!repos/|app/)([^/]+)/([^/]+?)(?:\.git)?/(info/refs|git-upload-pack|"
                r"git-receive-pack|HEAD)$")
    # web pages (not the REST API): at the root of the host in GHES mode too
    WEB_PATH = (r"^/(?:(?:organizations/[A-Za-z0-9-]+/)?settings/apps/new|apps/[^/]+/"
                r"installations/new|login/oauth/(?:authorize|access_token))$")
    ROUTES = routes(
        ("POST", r"^/(?:organizations/([A-Za-z0-9-]+)/)?settings/apps/new$", new_app_page),
        ("POST", r"^/app-manifests/([A-Za-z0-9_-]+)/conversions$", manifest_conversion),
        ("GET", r"^/apps/([^/]+)/installations/new$", install_page),
        ("GET", r"^/login/oauth/authorize$", oauth_authorize),
        ("POST", r"^/login/oauth/access_token$", oauth_token),
        ("GET", r"^/user$", get_user),
        ("GET", r"^/user/memberships/orgs/([A-Za-z0-9-]+)$", get_org_membership),
        (None, GIT_PATH, git),
        ("GET", r"^/app$", get_app),
        ("GET", r"^/app/installations$", list_installations),
        ("POST", r"^/app/installations/(\d+)/access_tokens$", create_token),
        ("GET", r"^/repos/([^/]+)/([^/]+)/installation$", get_repo_installation),
        (None, r"^/repos/([^/]+)/([^/]+)(/.*)?$", repo_api),
    )
    # matched against the path after /repos/{o}/{r}, once repo_api has checked the token
    REPO_ROUTES = routes(
        ("GET", r"^$", get_repo),
        ("GET", r"^/issues/(\d+)$", get_issue),
        ("GET", r"^/issues/(\d+)/comments$", list_comments),
        ("POST", r"^/issues/(\d+)/comments$", create_comment),
        ("PATCH", r"^/issues/comments/(\d+)$", update_comment),
        ("POST", r"^/issues/(\d+)/labels$", add_labels),
        ("DELETE", r"^/issues/(\d+)/labels/(.+)$", remove_label),
        ("POST", r"^/issues/(comments/)?(\d+)/reactions$", add_reaction),
        ("POST", r"^/pulls$", create_pull),
        ("GET", r"^/pulls$", list_pulls),
        ("GET", r"^/pulls/(\d+)$", get_pull),
        ("PATCH", r"^/pulls/(\d+)$", update_pull),
        ("GET", r"^/pulls/(\d+)/comments$", list_review_comments),
    )


def verify_rs256(pub_path, data, sig):
    """True if sig is an RSA-SHA256 signature of data by the key in pub_path (openssl CLI)."""
    with tempfile.TemporaryDirectory() as d:
        dp, sp = os.path.join(d, "data"), os.path.join(d, "sig")
        with open(dp, "wb") as f:
            f.write(data)
        with open(sp, "wb") as f:
            f.write(sig)
        out = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pub_path,
                              "-signature", sp, dp], capture_output=True)
        return out.returncode == 0


class GitHubStub:
    """The stand-in as an object: start() on a thread, stop() to shut it down."""

    def __init__(self, state_dir, port=0, app_key_pub=None, app_id="1", host="127.0.0.1",
                 api_prefix=""):
        self.state = State(state_dir, app_id=app_id, app_key_pub=app_key_pub)
        self.state.api_prefix = api_prefix.rstrip("/")
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        # serve_forever accepts after select() said a connection waits; when none is there any
        # more, a blocking accept() would hang the thread and then shutdown() forever.
        self.httpd.socket.settimeout(1.0)
        self.httpd.state = self.state
        self.port = self.httpd.server_address[1]
        self.web_url = f"http://{host}:{self.port}"
        self.state.base_url = self.web_url
        self.url = self.state.api_url  # the REST API (web_url + api_prefix)
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def serve_forever(self):
        self.httpd.serve_forever()

    # Conveniences mirroring the control endpoints.
    def seed_repo(self, full_name, **kw):
        return self.state.seed_repo(full_name, **kw)

    def state_dump(self):
        return json.loads(json.dumps(self.state.dump()))

    def requests(self):
        with self.state.lock:
            return json.loads(json.dumps(self.state.requests))

    def clear_requests(self):
        with self.state.lock:
            self.state.requests.clear()

    def config(self, **kw):
        """token_ttl, clock_offset, app_id, slug, installations (list of ids, or of
        {"id", "account", "target_type", "permissions"}), app_permissions (GET /app's, for an
        App not made from a manifest), manifest_code_ttl, users ({"alice": {"push": ["o/r"]}})."""
        with self.state.lock:
            for k in ("token_ttl", "clock_offset", "slug", "manifest_code_ttl", "users"):
                if k in kw:
                    setattr(self.state, k, kw[k])
            if "app_id" in kw:
                self.state.app_id = str(kw["app_id"])
            if "app_permissions" in kw:
                self.state.app_permissions = dict(kw["app_permissions"])
            if "installations" in kw:
                self.state.set_installations(kw["installations"])

    def fail(self, path, status=503, times=1, method=None, retry_after=None, headers=None,
             message=None, body=None, drop=False, after=False):
        with self.state.lock:
            self.state.failures.append({"path": path, "status": status, "times": times,
                                        "method": method, "retry_after": retry_after,
                                        "headers": headers, "message": message, "body": body,
                                        "drop": drop, "after": after})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--app-key-pub", help="PEM public key the App JWTs must verify against")
    ap.add_argument("--app-id", default="1")
    ap.add_argument("--seed", help='JSON file: {"repos": [{"full_name": "o/r", '
                                   '"source_dir": ..., "issues": [...]}]}')
    ap.add_argument("--token-ttl", type=int, default=3600)
    ap.add_argument("--api-prefix", default="",
                    help="serve the REST API under this path (/api/v3, as GitHub Enterprise "
                         "Server does); web and git URLs stay at the root of the same host")
    args = ap.parse_args(argv)
    stub = GitHubStub(args.state_dir, port=args.port, app_key_pub=args.app_key_pub,
                      app_id=args.app_id, host=args.host, api_prefix=args.api_prefix)
    stub.state.token_ttl = args.token_ttl
    if args.seed:
        with open(args.seed) as f:
            for r in json.load(f).get("repos", []):
                stub.seed_repo(**r)
    print(f"github stub listening on {stub.url}", flush=True)
    try:
        stub.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
