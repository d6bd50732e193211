"""One-click App registration end to end in the browser, against the GitHub stand-in:
`autopatch setup` starts a server without any App; /setup posts the manifest to the stand-in's
"new App" page, whose button comes back with a code; the callback stores the credentials (mode
0600) and the server verifies webhooks with the new secret at once; a forged state is refused;
no page is served on the public listener."""
import json
import os
import stat

from console_util import register_through_setup
from github_stub import GitHubStub
from server_util import Server, free_port, sign


def post_ping(s, secret):
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    return s.request("POST", "/api/github/webhooks", body, {
        "Content-Type": "application/json", "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": os.urandom(8).hex(), "X-Hub-Signature-256": sign(body, secret)})[0]


def test_register_then_webhooks_verify_with_the_new_secret(autopatch_bin, tmp_path, browser):
    gh = GitHubStub(str(tmp_path / "github")).start()
    port, admin = free_port(), free_port()
    creds = tmp_path / "secrets" / "creds.env"
    creds.parent.mkdir()
    s = Server(autopatch_bin, tmp_path, port, command="setup",
               WEBHOOK_SECRET="", AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{admin}",
               AUTOPATCH_PUBLIC_URL=f"http://127.0.0.1:{port}", GITHUB_URL=gh.url,
               GITHUB_API_URL=gh.url, AUTOPATCH_CREDENTIALS_FILE=str(creds))
    try:
        s.start()
        assert f"open http://127.0.0.1:{admin}/setup" in s.log_text()
        assert post_ping(s, "anything") == 401  # no secret yet: nothing is accepted
        for path in ("/setup", "/", "/jobs/1", "/login", "/assets/console.css"):
            assert s.get(path)[0] == 404, path  # no page on the public listener
        out = browser("registration.mjs", console=f"http://127.0.0.1:{admin}")
        assert out["setupStatus"] == 200 and out["setupHasHeading"] == 1
        assert out["hookUrl"] == f"http://127.0.0.1:{port}/api/github/webhooks"
        app = gh.state.apps[0]
        assert out["finalUrl"] == f"{gh.url}/apps/{app['slug']}/installations/new"
        # Stored atomically, only for the server's user.
        assert stat.S_IMODE(creds.stat().st_mode) == 0o600
        text = creds.read_text()
        assert f'APP_ID="{app["id"]}"' in text
        assert f'WEBHOOK_SECRET="{app["webhook_secret"]}"' in text
        assert f'GITHUB_CLIENT_ID="{app["client_id"]}"' in text
        assert "BEGIN RSA PRIVATE KEY" in text
        assert [p.name for p in creds.parent.iterdir()] == ["creds.env"]  # no temp left
        # The new secret is in use without a restart; any other is refused.
        assert post_ping(s, app["webhook_secret"]) == 200
        assert post_ping(s, "anything") == 401
        # A state this server did not issue is refused with a page that says what to do.
        assert out["forgedStatus"] == 400
        assert "Unknown registration" in out["forgedText"]
        assert "start again at /setup" in out["forgedText"]
        assert len(gh.state.apps) == 1  # the forged callback never reached GitHub
        assert app["webhook_secret"] not in s.log_text()
        # A code GitHub no longer honours (expired, or used): a page that says what to do,
        # nothing stored, the secret in use unchanged.
        gh.config(manifest_code_ttl=-1)
        status, page, _ = register_through_setup(f"http://127.0.0.1:{admin}")
        assert status == 502 and "register again at /setup" in page, page
        assert len(gh.state.apps) == 1 and f'APP_ID="{app["id"]}"' in creds.read_text()
        assert post_ping(s, app["webhook_secret"]) == 200
    finally:
        s.stop()
        gh.stop()
