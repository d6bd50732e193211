"""Who sees what on a console that needs sign-in (issue 13, item 4), over plain HTTP against the
GitHub stand-in's OAuth and REST endpoints:

- a signed-in user sees the jobs of the repositories they can push to, and of no other: not in
  the list (filters included), not the job page, not the live stream, not the trajectory, and
  the cancel and retry buttons refuse them even with their own session's CSRF token;
- AUTOPATCH_CONSOLE_USERS lets listed logins, and the active members of org:NAME entries (asked
  of GitHub with the user's token at sign-in), see every job and /metrics; a pending
  invitation, another organization or a membership GitHub refuses to tell does not."""
from console_util import Visitor, app_permissions, queue_job, register_app
from github_stub import GitHubStub
from server_util import Server, free_port


def start(binary, tmp_path, users, permissions=None, **settings):
    gh = GitHubStub(str(tmp_path / "github")).start()
    port, admin = free_port(), free_port()
    app = register_app(gh, f"http://127.0.0.1:{admin}", permissions)
    for repo in ("octo/calc", "octo/secret"):
        gh.seed_repo(repo)
    gh.config(users=users)
    s = Server(binary, tmp_path, port,
               AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{admin}", AUTOPATCH_CONSOLE_SIGN_IN="always",
               GITHUB_URL=gh.url, GITHUB_API_URL=gh.url, GITHUB_CLIENT_ID=app["client_id"],
               GITHUB_CLIENT_SECRET=app["client_secret"], **settings)
    return gh, s.start(), app


def state_of(s, job):
    return next(j["state"] for j in s.jobs() if j["id"] == job)


def job_paths(job):
    return (f"/jobs/{job}", f"/jobs/{job}/events", f"/jobs/{job}/trajectory",
            f"/jobs/{job}/output?line=0&field=diff")


def test_a_user_sees_nothing_of_a_repository_they_cannot_push_to(autopatch_bin, tmp_path):
    gh, s, _ = start(autopatch_bin, tmp_path,
                     {"alice": {"push": ["octo/calc"], "see": ["octo/secret"]},
                      "bob": {"see": ["octo/calc"]}})
    try:
        calc, secret, spare = (queue_job(s, "octo/calc", 1), queue_job(s, "octo/secret", 2),
                               queue_job(s, "octo/calc", 3))
        anon = Visitor(s.admin)
        for path in ("/", "/events", *job_paths(calc)):
            assert anon.get(path)[0] == 401, path
        assert anon.post(f"/jobs/{calc}/cancel", "0" * 64)[0] == 401

        bob = Visitor(s.admin)
        assert bob.sign_in("bob")[0] == 303
        status, text = bob.get("/")
        assert status == 200 and "octo/calc" not in text and "No jobs to show" in text
        # Nor does the list's live stream carry them.
        status, text = bob.stream("/events?after=0")
        assert status == 200 and text.startswith("retry:") and "octo/calc" not in text, text
        for query in ("?repo=octo/calc", "?state=queued", "?state=queued&repo=octo/calc"):
            status, text = bob.get("/" + query)
            assert status == 200 and f'href="/jobs/{calc}"' not in text, query
        for path in job_paths(calc):
            status, text = bob.get(path)
            assert status == 403, path
            assert "octo/calc" not in text and "Not your job" in text, path
        # His own session's token does not make the buttons his.
        token = bob.csrf()
        assert bob.post(f"/jobs/{spare}/cancel", token)[0] == 403
        assert state_of(s, spare) == "queued"

        alice = Visitor(s.admin)
        assert alice.sign_in("alice")[0] == 303
        status, text = alice.get("/")
        assert f'href="/jobs/{calc}"' in text and f'href="/jobs/{spare}"' in text
        assert "octo/secret" not in text  # she can see it on GitHub, but not push
        status, text = alice.stream("/events?after=0")
        assert status == 200 and f'job-{calc}' in text and "octo/secret" not in text, text
        assert f'href="/jobs/{secret}"' not in alice.get("/?repo=octo/secret")[1]
        # A stream filter too long to keep is refused, never cut to another repository.
        status, text = alice.get("/events?after=0&repo=octo/" + "c" * 400)
        assert status == 400 and "filter is too long" in text, text
        assert f'href="/jobs/{calc}"' not in alice.get("/?state=failed")[1]
        for path in job_paths(secret):
            assert alice.get(path)[0] == 403, path
        status, text = alice.get(f"/jobs/{calc}")
        assert status == 200 and "Cancel this job" in text
        assert alice.get(f"/jobs/{calc}/events")[0] == 200
        # Past the access check: the job has not run, so there is no trajectory yet.
        status, text = alice.get(f"/jobs/{calc}/trajectory")
        assert status == 404 and "No trajectory" in text
        status, text = alice.get(f"/jobs/{calc}/output?line=0&field=diff")
        assert status == 404 and "No trajectory" in text
        assert alice.post(f"/jobs/{spare}/cancel", alice.csrf())[0] == 303
        assert state_of(s, spare) == "cancelled"
        # A cancelled job offers "Retry"; bob still may not press it, alice may.
        assert bob.post(f"/jobs/{spare}/retry", token)[0] == 403
        assert state_of(s, spare) == "cancelled"
        assert alice.post(f"/jobs/{spare}/retry", alice.csrf())[0] == 303
        assert state_of(s, spare) == "queued"
        # A token of another session is refused too (CSRF tokens are bound to the session).
        assert alice.post(f"/jobs/{calc}/cancel", token)[0] == 403
        assert state_of(s, calc) == "queued"
    finally:
        s.stop()
        gh.stop()


def test_members_of_a_listed_organization_see_every_job(autopatch_bin, tmp_path):
    gh, s, _ = start(autopatch_bin, tmp_path, {"carol": {"orgs": ["acme"]},
                                "dave": {"pending_orgs": ["acme"]},
                                "erin": {"orgs": ["other"]},
                                "frank": {"orgs": ["acme"]},
                                "grace": {}},
                     AUTOPATCH_CONSOLE_USERS="Grace, org:acme")
    try:
        calc = queue_job(s, "octo/calc", 1)
        seen = {}
        for login in ("carol", "dave", "erin", "grace"):
            v = Visitor(s.admin)
            assert v.sign_in(login)[0] == 303, login
            seen[login] = (f'href="/jobs/{calc}"' in v.get("/")[1], v.get(f"/jobs/{calc}")[0],
                           v.get("/metrics")[0])
        assert seen == {"carol": (True, 200, 200),     # an active member of acme
                        "dave": (False, 403, 401),     # invited, not yet a member
                        "erin": (False, 403, 401),     # another organization
                        "grace": (True, 200, 200)}     # listed by login (any case)
        asked = [r for r in gh.requests() if r["path"] == "/user/memberships/orgs/acme"]
        assert len(asked) == 3  # carol, dave, erin; grace is listed by login
        # GitHub refuses to tell (the App lacks Members: read): frank is let in as a user
        # who sees the repositories he can push to (none), and the log says what to fix.
        gh.fail(r"^/user/memberships/orgs/acme$", status=403,
                message="Resource not accessible by integration")
        frank = Visitor(s.admin)
        assert frank.sign_in("frank")[0] == 303
        assert f'href="/jobs/{calc}"' not in frank.get("/")[1]
        assert frank.get("/metrics")[0] == 401
        assert "Members (read)" in s.log_text()
    finally:
        s.stop()
        gh.stop()


def test_org_entries_need_the_members_permission_the_manifest_asks_for(autopatch_bin,
                                                                       tmp_path):
    """deploy/app.yml asks for the organization permission Members (read), so org: entries
    work for an App registered in one click (the test above); an App registered without it
    gets GitHub's refusal, as on github.com: the member signs in as an ordinary user and the
    log says what to fix (and `autopatch doctor` too: test_doctor.py)."""
    assert app_permissions().get("members") == "read"
    without = {k: v for k, v in app_permissions().items() if k != "members"}
    gh, s, _ = start(autopatch_bin, tmp_path, {"carol": {"orgs": ["acme"]}}, without,
                     AUTOPATCH_CONSOLE_USERS="org:acme")
    try:
        calc = queue_job(s, "octo/calc", 1)
        carol = Visitor(s.admin)
        assert carol.sign_in("carol")[0] == 303
        assert f'href="/jobs/{calc}"' not in carol.get("/")[1]
        assert carol.get("/metrics")[0] == 401
        assert "Members (read)" in s.log_text()
        refused = [r for r in gh.requests() if r["path"] == "/user/memberships/orgs/acme"]
        assert len(refused) == 1
    finally:
        s.stop()
        gh.stop()
