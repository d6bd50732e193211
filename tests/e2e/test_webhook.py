"""POST /api/github/webhooks end to end: every `issues` and `issue_comment` example of the
pinned @octokit/webhooks-examples, signed and posted to the real binary, gets the right status
and the right job / no-job decision (read back with `autopatch jobs --json`); malformed
requests get their codes with JSON bodies; redeliveries and repeated triggers make one job."""
import copy
import json
import uuid

import pytest

from server_util import HOOK, SECRET, Server, examples, raw_exchange, sign

LABEL = "bug"  # the examples' label, used as the trigger label
TRUSTED = {"OWNER", "MEMBER", "COLLABORATOR"}


@pytest.fixture
def server(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL=LABEL).start()
    yield s
    s.stop()


def expected(event, p):
    """The routing rules of docs/architecture.md ("In"), written independently of the C code:
    ('job', trigger), ('cancel',) or ('ignore',)."""
    if p.get("sender", {}).get("type") == "Bot" or "installation" not in p:
        return ("ignore",)
    if event == "issues":
        name = (p.get("label") or {}).get("name")
        if p["action"] == "labeled" and name == LABEL:
            return ("job", "label")
        if p["action"] == "unlabeled" and name == LABEL:
            return ("cancel",)
        return ("ignore",)
    body = p["comment"]["body"].strip()
    if p["action"] != "created" or p["comment"]["author_association"] not in TRUSTED:
        return ("ignore",)
    if body != "/autopatch" and not body.startswith(("/autopatch ", "/autopatch\n")):
        return ("ignore",)
    if body[len("/autopatch"):].strip() == "stop":
        return ("cancel",)
    return ("job", "pr_feedback" if p["issue"].get("pull_request") else "comment")


def variants():
    """(name, event, payload): the examples as published (plus an installation where
    missing), and comment variants that exercise the command rules."""
    out = []
    for i, p in enumerate(examples("issues")):
        out.append((f"issues.{p['action']}#{i}", "issues", copy.deepcopy(p)))
        if p["action"] == "labeled":
            bot = copy.deepcopy(p)
            bot["sender"]["type"] = "Bot"
            out.append((f"issues.labeled-by-bot#{i}", "issues", bot))
    for i, p in enumerate(examples("issue_comment")):
        out.append((f"issue_comment.{p['action']}#{i}", "issue_comment", copy.deepcopy(p)))
        for tag, text, assoc in (("cmd", "/autopatch please add a test", "OWNER"),
                                 ("bare", "/autopatch", "MEMBER"),
                                 ("stop", "/autopatch stop", "COLLABORATOR"),
                                 ("untrusted", "/autopatch do it", "NONE"),
                                 ("lookalike", "/autopatchy do it", "OWNER")):
            v = copy.deepcopy(p)
            v["comment"]["body"] = text
            v["comment"]["author_association"] = assoc
            out.append((f"issue_comment.{p['action']}-{tag}#{i}", "issue_comment", v))
        pr = copy.deepcopy(p)
        pr["comment"]["body"] = "/autopatch rename the flag"
        pr["issue"]["pull_request"] = {"url": "https://api.github.com/repos/x/y/pulls/1"}
        out.append((f"issue_comment.{p['action']}-on-pr#{i}", "issue_comment", pr))
    for n, (name, event, p) in enumerate(out):
        p.setdefault("installation", {"id": 1000 + n, "node_id": "MDIz"})
        # A repository per variant, so each decision is read back on its own.
        p["repository"]["full_name"] = f"e2e/repo-{n}"
    return out


def test_every_issues_and_issue_comment_example(server):
    cases = variants()
    assert len([c for c in cases if c[1] == "issues"]) >= 29
    want_jobs = {}
    for name, event, payload in cases:
        want = expected(event, payload)
        status, body = server.post(payload, event=event)
        assert status == (202 if want[0] == "job" else 200), (name, status, body)
        assert "message" in body
        if want[0] == "job":
            assert body["message"] == "queued" and body["job"] > 0, (name, body)
            want_jobs[payload["repository"]["full_name"]] = (want[1], payload, name)
        elif want[0] == "cancel":
            assert body["message"].startswith("cancel"), (name, body)
        else:
            assert body["message"].startswith("ignored"), (name, body)
    jobs = {j["repo"]: j for j in server.jobs()}
    assert set(jobs) == set(want_jobs), sorted(set(jobs) ^ set(want_jobs))
    assert len(want_jobs) >= 10
    for repo, (trigger, payload, name) in want_jobs.items():
        j = jobs[repo]
        assert j["trigger"] == trigger, name
        assert j["state"] == "queued", name
        assert j["issue"] == payload["issue"]["number"], name
        if trigger != "label":
            text = payload["comment"]["body"].strip()[len("/autopatch"):].strip()
            assert j["feedback"] == text, name


def test_rejections_have_codes_and_json_bodies(server):
    payload = copy.deepcopy(examples("issues")[0])
    body = json.dumps(payload).encode()

    status, msg = server.post(body, secret="not-the-secret")
    assert status == 401 and "signature" in msg["message"]
    status, msg = server.post(body, headers={"X-Hub-Signature-256": "sha256=" + "0" * 64})
    assert status == 401
    status, msg = server.post(body, headers={"X-Hub-Signature-256": sign(body).upper()})
    assert status == 401
    for header in ("X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"):
        status, msg = server.post(body, drop=(header,))
        assert status == 400 and "headers missing" in msg["message"], header
    status, msg = server.post(body, headers={"Content-Type": "text/plain"})
    assert status == 415 and "application/json" in msg["message"]
    truncated = body[: len(body) // 2]
    status, msg = server.post(truncated)
    assert status == 400 and "JSON" in msg["message"]
    status, ctype, raw = server.request("GET", HOOK)
    assert status == 405 and json.loads(raw)["message"]
    status, ctype, raw = server.request("PUT", HOOK, body=body)
    assert status == 405
    assert server.jobs() == []


def test_26_mib_body_is_refused_without_buffering(server):
    size = 26 * 1024 * 1024
    head = (f"POST {HOOK} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: issues\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
            f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: {size}\r\n\r\n").encode()
    # Announced size: answered before the body is sent at all.
    assert raw_exchange(server.port, head, [b"{" * 65536], read_timeout=10) == 413
    # Chunked, so the size is only known while streaming: drained and refused, not buffered.
    head = head.replace(f"Content-Length: {size}".encode(), b"Transfer-Encoding: chunked")
    chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
    assert raw_exchange(server.port, head, [chunk] * 26 + [b"0\r\n\r\n"]) == 413
    # The server is still healthy afterwards.
    assert server.get("/healthz")[0] == 200


def labeled(repo="e2e/dedupe", number=7):
    p = copy.deepcopy([e for e in examples("issues") if e["action"] == "labeled"][0])
    p["installation"] = {"id": 4242}
    p["repository"]["full_name"] = repo
    p["issue"]["number"] = number
    return p


def test_same_delivery_twice_makes_one_job(server):
    delivery = str(uuid.uuid4())
    first = server.post(labeled(), delivery=delivery)
    second = server.post(labeled(), delivery=delivery)
    assert first[0] == 202
    assert second == (200, {"message": "duplicate delivery"})
    jobs = server.jobs()
    assert len(jobs) == 1 and jobs[0]["delivery"] == delivery


def test_trigger_for_active_issue_makes_no_second_job(server):
    assert server.post(labeled())[0] == 202
    status, body = server.post(labeled())
    assert status == 200 and "already active" in body["message"]
    assert server.post(labeled(number=8))[0] == 202
    assert sorted(j["issue"] for j in server.jobs()) == [7, 8]


def test_label_removed_cancels_queued_job(server):
    assert server.post(labeled())[0] == 202
    unl = labeled()
    unl["action"] = "unlabeled"
    status, body = server.post(unl)
    assert status == 200 and body["message"].startswith("cancel: 1")
    (job,) = server.jobs()
    assert job["state"] == "cancelled"
    # a new trigger after the cancel is accepted again
    assert server.post(labeled())[0] == 202


def test_secret_rotation(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL=LABEL,
               WEBHOOK_SECRET="new-secret-abc123", WEBHOOK_SECRET_PREVIOUS=SECRET).start()
    try:
        assert s.post(labeled(number=1), secret="new-secret-abc123")[0] == 202
        assert s.post(labeled(number=2), secret=SECRET)[0] == 202
        assert s.post(labeled(number=3), secret="some-other-secret")[0] == 401
        assert sorted(j["issue"] for j in s.jobs()) == [1, 2]
    finally:
        s.stop()
