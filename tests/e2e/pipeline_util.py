"""Helpers for the end-to-end pipeline tests (and bench/pipeline).

A `Rig` runs the product the way GitHub would drive it, on 127.0.0.1: the GitHub stand-in
(standins/github_stub.py, in-process) with a copy of examples/calc as octo/calc and its issue
#1, the scripted model (standins/model_stub.py, in-process), and the real `autopatch serve`
binary with the real Docker engine. Deliveries are signed like GitHub's. Every secret the rig
hands autopatch is a unique canary so tests can look for leaks.
"""
import copy
import functools
import hashlib
import hmac
import json
import os
import pathlib
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid

from github_stub import GitHubStub
from ports import free_port  # noqa: F401 (tests import it from here)
from model_stub import StubServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPO = "octo/calc"
FIXTURES = ROOT / "tests" / "fixtures" / "node_modules" / "@octokit" / "webhooks-examples"
CALC_SCRIPT = ROOT / "standins" / "scripts" / "calc_happy.json"




def calc_issue():
    text = (ROOT / "examples" / "calc" / "ISSUE.md").read_text()
    title, _, body = text.partition("\n")
    return title.strip(), body.strip()


def happy_script():
    return json.loads(CALC_SCRIPT.read_text())


def _example(event, action):
    """A real payload from @octokit/webhooks-examples, for its shape."""
    for ex in _examples_of(event):
        if ex.get("action") == action:
            return copy.deepcopy(ex)
    raise LookupError(f"no {event}.{action} example")


@functools.lru_cache(maxsize=None)
def _examples_of(event):
    """One event's examples from the 4 MB index, parsed once a process (the caller copies)."""
    index = json.loads((FIXTURES / "api.github.com" / "index.json").read_text())
    for e in index:
        if e["name"] == event:
            return e["examples"]
    raise LookupError(f"no {event} examples")


class Rig:
    def __init__(self, tmp, autopatch_bin, script=None, env=None, workers=1, files=None,
                 issues=1, omit_usage=False, ghes=False, stub=None):
        self.tmp = pathlib.Path(tmp)
        self.stub = stub  # the Kubernetes API stand-in when the boxes are pods
        self.bin = str(autopatch_bin)
        self.script = script if script is not None else happy_script()
        self.extra_env = dict(env or {})
        self.workers = workers
        self.files = files or {}
        self.n_issues = issues  # issues #1..#n, all the same calc bug
        self.omit_usage = omit_usage
        # GitHub Enterprise Server: the stand-in serves the API under /api/v3 and web + git at
        # the root; autopatch gets only GITHUB_URL and must derive the rest.
        self.ghes = ghes
        self.owner = "pipe-" + secrets.token_hex(6)
        self.webhook_secret = "canary-webhook-" + secrets.token_hex(12)
        self.model_key = "canary-model-key-" + secrets.token_hex(12)
        self.serve = None
        self.command = "serve"  # or "setup": registration mode, no App yet
        self.serve_log = self.tmp / "serve.log"
        self.port = free_port()
        self.title, self.body = calc_issue()

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self, serve=True):
        key, pub = self.tmp / "app.pem", self.tmp / "app.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                       check=True, capture_output=True)
        self.app_key = key.read_text()
        self.gh = GitHubStub(str(self.tmp / "github"), app_key_pub=str(pub), app_id="1",
                             api_prefix="/api/v3" if self.ghes else "").start()
        self.gh.seed_repo(REPO, source_dir=str(ROOT / "examples" / "calc"), files=self.files,
                          issues=[{"title": self.title, "body": self.body,
                                   "labels": ["autopatch"]}] * self.n_issues)
        self.model = StubServer(self.script, omit_usage=self.omit_usage).start()
        if serve:
            self.start_serve()
        return self

    def env(self):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("AUTOPATCH_", "GITHUB_", "OPENAI_", "ANTHROPIC_"))}
        e.update({
            "AUTOPATCH_ENV_FILE": "/dev/null",
            "APP_ID": "1",
            "PRIVATE_KEY_PATH": str(self.tmp / "app.pem"),
            "WEBHOOK_SECRET": self.webhook_secret,
            "PORT": str(self.port),
            "AUTOPATCH_BIND": "127.0.0.1",
            "AUTOPATCH_ADMIN_LISTEN": "off",
            "AUTOPATCH_DB": str(self.tmp / "autopatch.db"),
            "AUTOPATCH_DATA_DIR": str(self.tmp / "data"),
            "AUTOPATCH_WORKERS": str(self.workers),
            "AUTOPATCH_OWNER_ID": self.owner,
            "AUTOPATCH_LLM_PROVIDER": "openai",
            "AUTOPATCH_LLM_BASE_URL": self.model.url + "/v1",
            "AUTOPATCH_LLM_MODEL": "scripted-calc",
            "AUTOPATCH_LLM_API_KEY": self.model_key,
            "AUTOPATCH_COMMENT_INTERVAL_MS": "500",
            "AUTOPATCH_RETRY_SECONDS": "1",
            "AUTOPATCH_LEASE_SECONDS": "5",
            "AUTOPATCH_GH_BACKOFF_MS": "100",
            "AUTOPATCH_GH_SECONDARY_WAIT_S": "1",
            "AUTOPATCH_GH_WRITE_SPACING_MS": "0",
            "AUTOPATCH_LOG_LEVEL": "debug",
        })
        if self.ghes:
            e["GITHUB_URL"] = self.gh.web_url
        else:
            e["GITHUB_API_URL"] = self.gh.url
        if self.stub:
            e.update(self.stub.env(self.stub.kubeconfig(self.tmp / "kubeconfig")))
        e.update(self.extra_env)
        return e

    def start_serve(self):
        log = open(self.serve_log, "ab")
        self.serve = subprocess.Popen([self.bin, self.command], env=self.env(), stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.serve.poll() is not None:
                raise AssertionError("autopatch serve exited:\n" + self.log_text()[-3000:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        raise AssertionError("autopatch serve did not answer /healthz:\n" + self.log_text())

    def kill_serve(self, sig=signal.SIGKILL):
        if self.serve and self.serve.poll() is None:
            self.serve.send_signal(sig)
            self.serve.wait(timeout=60)
        self.serve = None

    def stop(self):
        self.kill_serve(signal.SIGTERM)
        for s in (getattr(self, "model", None), getattr(self, "gh", None)):
            if s:
                try:
                    s.stop()
                except Exception:  # noqa: BLE001 - best effort at teardown
                    pass
        # A test that failed half-way may leave a box: remove only ours.
        ids = self.containers()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)

    def log_text(self):
        try:
            return self.serve_log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # ---- webhooks ----------------------------------------------------------------------
    def post(self, event, payload, delivery=None, timeout=10, port=None):
        """POST a signed delivery to serve's webhook (or to port); returns the HTTP status."""
        body = json.dumps(payload).encode()
        sig = "sha256=" + hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port or self.port}/api/github/webhooks", data=body, method="POST",
            headers={"Content-Type": "application/json", "X-GitHub-Event": event,
                     "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
                     "X-Hub-Signature-256": sig, "User-Agent": "GitHub-Hookshot/e2e"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def _base(self, event, action):
        p = _example(event, action)
        repo = p["repository"]
        repo["full_name"], repo["name"], repo["id"] = REPO, "calc", 4242
        repo["owner"]["login"] = "octo"
        p["installation"] = {"id": 1, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
        p["sender"]["type"] = "User"
        return p

    def labeled_payload(self, issue=1, action="labeled"):
        p = self._base("issues", action)
        p["label"] = {"name": "autopatch", "color": "ededed"}
        p["issue"].update({"number": issue, "title": self.title, "body": self.body,
                           "labels": [{"name": "autopatch"}]})
        p["issue"].pop("pull_request", None)
        return p

    def label(self, issue=1, delivery=None):
        return self.post("issues", self.labeled_payload(issue), delivery)

    def unlabel(self, issue=1):
        return self.post("issues", self.labeled_payload(issue, "unlabeled"))

    def review_comment(self, pull, body, association="OWNER"):
        p = self._base("pull_request_review_comment", "created")
        p["pull_request"].update({"number": pull})
        p["pull_request"]["head"]["ref"] = "autopatch/issue-1"
        p["comment"].update({"id": 888000 + secrets.randbelow(1000), "body": body,
                             "author_association": association})
        return self.post("pull_request_review_comment", p)

    def comment(self, number, body, on_pr=False, association="OWNER", comment_id=None):
        p = self._base("issue_comment", "created")
        p["issue"].update({"number": number, "title": self.title})
        if on_pr:
            p["issue"]["pull_request"] = {"url": f"{self.gh.url}/repos/{REPO}/pulls/{number}"}
        else:
            p["issue"].pop("pull_request", None)
        p["comment"].update({"id": comment_id or 777000 + secrets.randbelow(1000), "body": body,
                             "author_association": association})
        return self.post("issue_comment", p)

    # ---- observations ------------------------------------------------------------------
    def state(self):
        return self.gh.state_dump()["repos"][REPO]

    def bot_comments(self, number=1):
        return [c for c in self.state()["comments"]
                if c["issue"] == number and c["user"]["login"].endswith("[bot]")]

    def pulls(self):
        return self.state()["pulls"]

    def jobs(self):
        out = subprocess.run([self.bin, "jobs", "--json"], env=self.env(), capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        return data["jobs"] if isinstance(data, dict) else data

    def job_done(self, n=1):
        """True once at least n jobs exist and none is queued or running."""
        js = self.jobs()
        return len(js) >= n and all(j["state"] in ("succeeded", "failed", "cancelled")
                                    for j in js)

    def containers(self, job=None):
        """Our containers; with job ("job-1"), only the ones that job used (the warm pool
        keeps ready boxes with no job)."""
        if self.stub:  # pods of the stand-in
            sel = f"autopatch.owner%3D{self.owner}" + (f",autopatch.job%3D{job}" if job else "")
            code, body = self.stub.api("GET", "/api/v1/namespaces/autopatch-sandbox/pods"
                                       f"?labelSelector={sel}")
            assert code == 200, body
            return [i["metadata"]["name"] for i in body["items"]]
        filters = ["--filter", f"label=autopatch.owner={self.owner}"]
        if job:
            filters += ["--filter", f"label=autopatch.job={job}"]
        out = subprocess.run(["docker", "ps", "-aq", *filters], capture_output=True, text=True)
        return out.stdout.split()

    def job_boxes(self, job_id=1):
        """Short ids of the containers a job used (from its "sandbox <id> ready" events)."""
        out = subprocess.run([self.bin, "jobs", "--id", str(job_id), "--json"], env=self.env(),
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        events = json.loads(out.stdout).get("events", [])
        return [m.split()[1] for m in (e.get("message") or "" for e in events)
                if m.startswith("sandbox ") and " ready" in m]

    def boxes_left(self, job_id=1):
        """The job's containers that still exist; asserts the job recorded at least one."""
        used = self.job_boxes(job_id)
        assert used, "the job recorded no sandbox"
        if self.stub:  # pod names share their first 12 bytes: ask by the job's label
            return self.containers(job=f"job-{job_id}")
        ours = self.containers()
        return [b for b in used if any(c.startswith(b) or b.startswith(c) for c in ours)]

    def wait(self, pred, timeout=240, what="condition"):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = pred()
            if last:
                return last
            if self.serve is not None and self.serve.poll() is not None:
                raise AssertionError(f"autopatch serve died waiting for {what}:\n"
                                     + self.log_text()[-4000:])
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; jobs={self.safe_jobs()}\n"
                             + self.log_text()[-4000:])

    def safe_jobs(self):
        try:
            return self.jobs()
        except Exception as e:  # noqa: BLE001 - diagnostics only
            return repr(e)

    def branch_files(self, branch):
        """{path: content} of the files changed on branch against main, from the bare repo."""
        bare = self.state()["bare"]
        names = subprocess.run(["git", "--git-dir", bare, "diff", "--name-only",
                                f"main...{branch}"], capture_output=True, text=True,
                               check=True).stdout.split()
        return {n: subprocess.run(["git", "--git-dir", bare, "show", f"{branch}:{n}"],
                                  capture_output=True, text=True).stdout for n in names}

    def branch_log(self, branch):
        bare = self.state()["bare"]
        return subprocess.run(["git", "--git-dir", bare, "log", "--format=%H %s",
                               f"main..{branch}"], capture_output=True, text=True,
                              check=True).stdout.splitlines()

    def canaries(self):
        """Every secret value autopatch was given or was issued."""
        with self.gh.state.lock:
            tokens = list(self.gh.state.tokens)
        key_lines = [ln for ln in self.app_key.splitlines() if ln and "-----" not in ln]
        return [self.webhook_secret, self.model_key, *tokens, *key_lines]


def commit_to_branch(rig, branch, files, message="change by hand"):
    """Commit files ({path: text}) on top of branch in the stand-in's bare repository, as a
    person (or an earlier autopatch version) pushing to it would."""
    bare = rig.state()["bare"]
    work = rig.tmp / ("work-" + secrets.token_hex(4))
    run = lambda *a: subprocess.run(a, cwd=work, check=True, capture_output=True)  # noqa: E731
    subprocess.run(["git", "clone", "-q", "-b", branch, bare, str(work)], check=True,
                   capture_output=True)
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    run("git", "add", "-A")
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    run("git", "push", "-q", "origin", f"HEAD:{branch}")


def human_comment(rig, number, body):
    """A comment by a person on issue/PR number in the stand-in; returns its id."""
    req = urllib.request.Request(
        rig.gh.url + "/_stub/comments", method="POST",
        data=json.dumps({"repo": REPO, "issue": number, "count": 1, "body_prefix": body}).encode(),
        headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()
    return max(c["id"] for c in rig.state()["comments"] if c["issue"] == number
               and not c["user"]["login"].endswith("[bot]"))


def job_events(rig, job_id):
    out = subprocess.run([rig.bin, "jobs", "--id", str(job_id), "--json"], env=rig.env(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [e.get("message") or "" for e in json.loads(out.stdout).get("events", [])]
