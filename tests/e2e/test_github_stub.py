"""The GitHub stand-in's own contract (standins/github_stub.py), which the pipeline, demo
and github/ tests rely on: JWT checked with the public key, tokens, GitHub's error shapes,
git smart HTTP with x-access-token Basic auth, failure injection and the request log."""
import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from github_util import GitHubStub, make_app_key


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign_jwt(key, claims):
    head = b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key)],
                         input=f"{head}.{body}".encode(), capture_output=True, check=True).stdout
    return f"{head}.{body}.{b64url(sig)}"


def call(url, method="GET", token=None, body=None):
    req = urllib.request.Request(url, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


@pytest.fixture(scope="module")
def gh(tmp_path_factory):
    d = tmp_path_factory.mktemp("stub")
    key, pub = make_app_key(d)
    stub = GitHubStub(str(d / "state"), app_key_pub=str(pub), app_id="77").start()
    stub.seed_repo("octo/hello", files={"a.txt": "hi\n"},
                   issues=[{"title": "Bug", "body": "b", "labels": ["autopatch"]}])
    now = int(time.time())
    jwt = sign_jwt(key, {"iat": now - 60, "exp": now + 540, "iss": 77})
    st, tok, _ = call(f"{stub.url}/app/installations/1/access_tokens", "POST", jwt)
    assert st == 201, tok
    yield {"stub": stub, "key": key, "dir": d, "token": tok["token"], "jwt": jwt}
    stub.stop()


def test_jwt_checked_against_public_key_and_claims(gh, tmp_path):
    url = gh["stub"].url + "/app"
    assert call(url, token=gh["jwt"])[0] == 200
    other, _ = make_app_key(tmp_path)
    now = int(time.time())
    st, body, _ = call(url, token=sign_jwt(other, {"iat": now - 60, "exp": now + 540, "iss": 77}))
    assert (st, body["message"]) == (401, "A JSON web token could not be decoded")
    st, body, _ = call(url, token=sign_jwt(gh["key"], {"iat": now + 300, "exp": now + 600,
                                                       "iss": 77}))
    assert st == 401 and body["message"].startswith("'Issued at' claim ('iat')")
    st, body, _ = call(url, token=sign_jwt(gh["key"], {"iat": now - 60, "exp": now + 3600,
                                                       "iss": 77}))
    assert st == 401 and "'Expiration time' claim ('exp')" in body["message"]


def test_tokens_and_error_shapes(gh):
    url, tok = gh["stub"].url, gh["token"]
    assert tok.startswith("ghs_") and len(tok) == 40
    st, issue, headers = call(f"{url}/repos/octo/hello/issues/1", token=tok)
    assert st == 200 and issue["labels"][0]["name"] == "autopatch"
    assert headers["X-RateLimit-Remaining"] == "4999"
    st, body, _ = call(f"{url}/repos/octo/hello/issues/1", token="ghs_" + "x" * 36)
    assert (st, body["message"]) == (401, "Bad credentials")
    st, body, _ = call(f"{url}/repos/octo/nope", token=tok)
    assert (st, body["message"]) == (404, "Not Found")
    st, body, _ = call(f"{url}/repos/octo/hello/pulls", "POST", tok,
                       {"title": "t", "head": "nope", "base": "main"})
    assert st == 422 and body["message"] == "Validation Failed"
    assert body["errors"] == [{"resource": "PullRequest", "field": "head", "code": "invalid"}]


def test_git_smart_http_needs_the_issued_token(gh, tmp_path):
    url = gh["stub"].url.replace("http://", "http://x-access-token:{}@") + "/octo/hello.git"
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin"}
    bad = subprocess.run(["git", "clone", "-q", url.format("ghs_" + "y" * 36), str(tmp_path / "a")],
                         capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "Authentication failed" in bad.stderr
    good = subprocess.run(["git", "clone", "-q", url.format(gh["token"]), str(tmp_path / "b")],
                          capture_output=True, text=True, env=env)
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "b" / "a.txt").read_text() == "hi\n"


def test_failure_injection_and_request_log(gh):
    stub, url, tok = gh["stub"], gh["stub"].url, gh["token"]
    stub.fail(r"^/repos/octo/hello$", status=403, retry_after=1, times=1)
    st, body, headers = call(f"{url}/repos/octo/hello", token=tok)
    assert st == 403 and headers["Retry-After"] == "1"
    assert "secondary rate limit" in body["message"]
    assert call(f"{url}/repos/octo/hello", token=tok)[0] == 200
    stub.fail(r"^/repos/octo/hello$", status=429, times=1, method="GET")
    assert call(f"{url}/repos/octo/hello", token=tok)[0] == 429
    log = [r for r in stub.requests() if r["path"] == "/repos/octo/hello"]
    assert [r["method"] for r in log[-3:]] == ["GET", "GET", "GET"]
    assert log[-1]["auth_scheme"] == "Bearer"


def test_runs_as_a_program(tmp_path):
    """The command-line form used by `autopatch demo` and by the C unit tests."""
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"repos": [{"full_name": "o/r", "files": {"x": "1\n"},
                                           "issues": [{"title": "T"}]}]}))
    p = subprocess.Popen([sys.executable, "standins/github_stub.py", "--port", "0",
                          "--state-dir", str(tmp_path / "s"), "--seed", str(seed)],
                         stdout=subprocess.PIPE, text=True,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    try:
        line = p.stdout.readline()
        assert line.startswith("github stub listening on http://127.0.0.1:")
        base = line.split()[-1]
        with urllib.request.urlopen(base + "/_stub/state", timeout=10) as r:
            state = json.loads(r.read())
        assert state["repos"]["o/r"]["issues"]["1"]["title"] == "T"
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_ghes_mode_serves_the_api_under_api_v3_and_git_at_the_root(tmp_path):
    key, pub = make_app_key(tmp_path)
    stub = GitHubStub(str(tmp_path / "state"), app_key_pub=str(pub), app_id="77",
                      api_prefix="/api/v3").start()
    try:
        stub.seed_repo("octo/hello", files={"a.txt": "hi\n"})
        assert stub.url == stub.web_url + "/api/v3"
        now = int(time.time())
        jwt = sign_jwt(key, {"iat": now - 60, "exp": now + 540, "iss": 77})
        st, tok, _ = call(f"{stub.url}/app/installations/1/access_tokens", "POST", jwt)
        assert st == 201, tok
        st, repo, _ = call(f"{stub.url}/repos/octo/hello", token=tok["token"])
        assert st == 200
        assert repo["url"] == f"{stub.url}/repos/octo/hello"
        assert repo["html_url"] == f"{stub.web_url}/octo/hello"
        assert repo["clone_url"] == f"{stub.web_url}/octo/hello.git"
        # the API is not at the root, and git is not under the prefix
        assert call(f"{stub.web_url}/repos/octo/hello", token=tok["token"])[0] == 404
        auth = "x-access-token:" + tok["token"]
        ok = subprocess.run(["git", "ls-remote", repo["clone_url"].replace(
            "http://", f"http://{auth}@")], capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0 and "refs/heads/main" in ok.stdout, ok.stderr
        bad = subprocess.run(["git", "ls-remote", f"{stub.url}/octo/hello.git".replace(
            "http://", f"http://{auth}@")], capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0
        full = [r["full_path"] for r in stub.requests()]
        assert "/api/v3/repos/octo/hello" in full and "/repos/octo/hello" in full
    finally:
        stub.stop()


def test_org_membership_of_the_signed_in_user(gh):
    """GET /user/memberships/orgs/{org} with a user's token: GitHub's org-membership shape for
    an active or pending member, 404 for anyone else, 401 without a user token."""
    stub = gh["stub"]
    stub.config(users={"carol": {"orgs": ["acme"], "pending_orgs": ["beta"]}})
    with stub.state.lock:
        stub.state.user_tokens["ghu_carol"] = "carol"
    url = f"{stub.url}/user/memberships/orgs"
    st, body, _ = call(f"{url}/ACME", token="ghu_carol")  # org names are case-insensitive
    assert st == 200, body
    assert {"url", "state", "role", "organization_url", "organization", "user"} <= set(body)
    assert body["state"] == "active" and body["user"]["login"] == "carol"
    assert body["organization"]["login"] == "ACME"
    assert call(f"{url}/beta", token="ghu_carol")[1]["state"] == "pending"
    st, body, _ = call(f"{url}/other", token="ghu_carol")
    assert st == 404 and body["message"] == "Not Found"
    assert call(f"{url}/acme")[0] == 401
    assert call(f"{url}/acme", token=gh["token"])[0] == 401  # an installation token is no user
