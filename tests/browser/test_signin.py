"""Sign-in through the stand-in's OAuth pages on a console that requires it: nothing but the
sign-in page without a session; a user without push access to a repository sees nothing of
its jobs (list, page, events); a user with push access sees them and may press the buttons,
which need the session's CSRF token. Session cookies are HttpOnly, Secure and SameSite=Lax."""
from console_util import queue_job, register_app
from github_stub import GitHubStub
from server_util import SECRET, Server, free_port


def test_sign_in_shows_only_repositories_the_user_can_push_to(autopatch_bin, tmp_path,
                                                                browser):
    gh = GitHubStub(str(tmp_path / "github")).start()
    port, admin = free_port(), free_port()
    console = f"http://127.0.0.1:{admin}"
    app = register_app(gh, console)
    gh.seed_repo("octo/calc")
    gh.seed_repo("octo/secret")
    gh.config(users={"alice": {"push": ["octo/calc"], "see": ["octo/secret"]},
                     "bob": {"see": ["octo/calc"]}})
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{admin}",
               AUTOPATCH_CONSOLE_SIGN_IN="always", GITHUB_URL=gh.url, GITHUB_API_URL=gh.url,
               GITHUB_CLIENT_ID=app["client_id"], GITHUB_CLIENT_SECRET=app["client_secret"])
    try:
        s.start()
        calc = queue_job(s, "octo/calc", 1)
        secret = queue_job(s, "octo/secret", 2)
        # Without a session: 401 everywhere but the sign-in page, and no job data.
        for path in ("/", f"/jobs/{calc}", f"/jobs/{calc}/events", f"/jobs/{calc}/trajectory",
                     "/setup", "/metrics"):
            status, _, body = s.admin_request("GET", path)
            assert status == 401, path
            assert b"octo/calc" not in body and b"octo/secret" not in body
        out = browser("signin.mjs", console=console, aliceJob=calc, secretJob=secret)
        assert out["before"]["status"] == 401
        assert "Sign in" in out["before"]["text"]
        assert "octo/calc" not in out["bobList"] and "octo/secret" not in out["bobList"]
        assert "No jobs to show" in out["bobList"]
        assert out["bobJobStatus"] == 403 and out["bobEventsStatus"] == 403
        cookie = next(c for c in out["bobCookies"] if c["name"] == "ap_session")
        assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
        assert cookie["expires"] > 0
        assert "octo/calc" in out["aliceList"]
        assert "octo/secret" not in out["aliceList"]  # alice can see it but not push
        assert out["aliceJobStatus"] == 200
        assert out["forgedCancel"] == 403
        assert out["afterCancel"].startswith("cancelled")
        assert SECRET not in s.log_text() and app["client_secret"] not in s.log_text()
    finally:
        s.stop()
        gh.stop()


def test_anonymous_logins_and_a_forged_link_do_not_break_a_sign_in(autopatch_bin, tmp_path,
                                                                    browser):
    """Issue 29, item 4: the pending state is the browser's own (a signed cookie), so 10,000
    anonymous GET /login evict nothing, and Mallory's link opened in Alice's browser is
    refused without ending the sign-in Alice has in progress."""
    gh = GitHubStub(str(tmp_path / "github")).start()
    port, admin = free_port(), free_port()
    console = f"http://127.0.0.1:{admin}"
    app = register_app(gh, console)
    gh.config(users={"alice": {}, "mallory": {}})
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{admin}",
               AUTOPATCH_CONSOLE_SIGN_IN="always", GITHUB_URL=gh.url, GITHUB_API_URL=gh.url,
               GITHUB_CLIENT_ID=app["client_id"], GITHUB_CLIENT_SECRET=app["client_secret"])
    try:
        s.start()
        out = browser("signin-evict.mjs", console=console)
        print(f"10,000 anonymous /login in {out['floodSeconds']:.1f} s")
        assert out["floodFailures"] == 0
        assert out["forgedStatus"] == 400
        assert "not the one this browser was given" in out["forgedText"]
        assert "Signed in as alice" in " ".join(out["aliceHeader"].split())
        assert out["aliceUrl"] == console + "/"
        assert "ap_session" in out["cookies"] and "ap_login" not in out["cookies"]
    finally:
        s.stop()
        gh.stop()
