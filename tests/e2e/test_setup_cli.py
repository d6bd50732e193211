"""`autopatch setup` and the doctor's public-URL check (issue 13 items 1 and 7)."""
import json
import subprocess
import urllib.request

import pytest

from console_util import register_through_setup
from pipeline_util import Rig
from server_util import Server, clean_env, free_port


def run(binary, tmp, *args, **env):
    return subprocess.run([str(binary), *args], cwd=tmp, env=clean_env(tmp, **env),
                          capture_output=True, text=True, timeout=60)


def test_setup_needs_the_public_url(autopatch_bin, tmp_path):
    out = run(autopatch_bin, tmp_path, "setup", AUTOPATCH_ADMIN_LISTEN="127.0.0.1:1")
    assert out.returncode == 2
    assert "AUTOPATCH_PUBLIC_URL is not set" in out.stderr


def test_setup_prints_the_url_of_a_running_server(autopatch_bin, tmp_path):
    s = Server(autopatch_bin, tmp_path, free_port()).start()
    try:
        out = run(autopatch_bin, tmp_path, "setup", AUTOPATCH_ADMIN_LISTEN=s.admin,
                  AUTOPATCH_PUBLIC_URL="https://autopatch.example.org")
        assert out.returncode == 0, out.stderr
        assert f"open http://{s.admin}/setup" in out.stdout
        assert "registration mode" not in out.stdout
    finally:
        s.stop()


def test_serve_without_a_secret_still_refuses_to_start(autopatch_bin, tmp_path):
    out = run(autopatch_bin, tmp_path, "serve", PORT=free_port())
    assert out.returncode == 2
    assert "WEBHOOK_SECRET is not set" in out.stderr and "autopatch setup" in out.stderr


def test_doctor_says_a_loopback_public_url_is_unreachable(autopatch_bin, tmp_path):
    out = run(autopatch_bin, tmp_path, "doctor", AUTOPATCH_PUBLIC_URL="http://127.0.0.1:3000")
    line = next(l for l in out.stdout.splitlines() if "public URL" in l)
    assert line.startswith("✗") and "loopback or private" in line and "smee" in line
    out = run(autopatch_bin, tmp_path, "doctor", AUTOPATCH_PUBLIC_URL="https://10.1.2.3")
    assert any(l.startswith("✗ public URL") for l in out.stdout.splitlines())


def public_url_line(binary, tmp, url):
    out = run(binary, tmp, "doctor", AUTOPATCH_PUBLIC_URL=url)
    return next(l for l in out.stdout.splitlines() if "public URL" in l)


@pytest.mark.parametrize("url", ["http://[::1]:3000", "https://192.168.1.5",
                                 "https://172.20.0.9/hook", "https://169.254.1.1",
                                 "https://100.64.0.1", "https://[fd00::1]", "http://0.0.0.0"])
def test_doctor_names_every_address_github_cannot_reach(autopatch_bin, tmp_path, url):
    line = public_url_line(autopatch_bin, tmp_path, url)
    assert line.startswith("✗") and "loopback or private" in line, line


def test_doctor_on_names_that_do_not_resolve_and_public_addresses(autopatch_bin, tmp_path):
    line = public_url_line(autopatch_bin, tmp_path, "https://autopatch.invalid")
    assert line.startswith("✗") and "does not resolve" in line, line
    line = public_url_line(autopatch_bin, tmp_path, "ftp://example.org")
    assert line.startswith("✗") and "not an http(s) URL" in line, line
    # A public address passes (as far as this host can tell); plain http is pointed out.
    line = public_url_line(autopatch_bin, tmp_path, "https://140.82.112.3")
    assert line.startswith("✓") and "public address" in line, line
    line = public_url_line(autopatch_bin, tmp_path, "http://140.82.112.3")
    assert line.startswith("✓") and "prefer https" in line, line


def healthz(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.parametrize("before", ["no App", "another App"])
def test_a_job_runs_after_registration_without_a_restart(autopatch_bin, tmp_path, before):
    """The registration at /setup hands the workers the new App's id and key (and the verifier
    its webhook secret) in the running process, so a labelled issue becomes a proven draft PR
    with no restart: from `autopatch setup` with no App at all (the workers start then), and
    from `serve` with workers running as another App (they switch; the stand-in now accepts
    only the new App's JWTs)."""
    admin = free_port()
    creds = tmp_path / "creds.env"
    rig = Rig(tmp_path, autopatch_bin)
    try:
        rig.start(serve=False)
        rig.extra_env.update({
            "AUTOPATCH_ADMIN_LISTEN": f"127.0.0.1:{admin}",
            "AUTOPATCH_PUBLIC_URL": f"http://127.0.0.1:{rig.port}",
            "GITHUB_URL": rig.gh.url, "AUTOPATCH_CREDENTIALS_FILE": str(creds)})
        if before == "no App":
            rig.command = "setup"
            rig.extra_env.update({"APP_ID": "", "PRIVATE_KEY_PATH": "", "WEBHOOK_SECRET": ""})
        rig.start_serve()
        pid = rig.serve.pid
        if before == "no App":
            assert healthz(rig.port)["workers"] == 0  # no App: nothing could run
            assert rig.label() == 401  # and no secret: nothing is accepted
        status, _, where = register_through_setup(f"http://127.0.0.1:{admin}")
        app = rig.gh.state.apps[0]
        assert status == 303 and where.endswith(f"/apps/{app['slug']}/installations/new")
        assert f'APP_ID="{app["id"]}"' in creds.read_text()
        assert healthz(rig.port)["workers"] == 1, rig.log_text()[-2000:]
        rig.webhook_secret = app["webhook_secret"]
        assert rig.label() == 202
        rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
        jobs = rig.jobs()
        assert [j["state"] for j in jobs] == ["succeeded"], (jobs, rig.log_text()[-3000:])
        assert len(rig.pulls()) == 1 and rig.pulls()[0]["draft"] is True
        # The installation token was minted with a JWT of the new App (the stand-in verifies
        # its signature against the new key and its iss against the new id).
        assert any(r["method"] == "POST" and r["path"] == "/app/installations/1/access_tokens"
                   for r in rig.gh.requests())
        assert rig.serve.pid == pid and rig.serve.poll() is None  # the same process
        assert (f"worker(s) started for App {app['id']}" if before == "no App" else
                f"the workers use App {app['id']} from now on") in rig.log_text()
        assert app["pem"].splitlines()[1] not in rig.log_text()
    finally:
        rig.stop()
