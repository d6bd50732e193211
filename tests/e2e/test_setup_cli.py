"""`autopatch setup` and the doctor's public-URL check (issue 13 items 1 and 7)."""
import subprocess

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
