"""The command line itself: version, help, and unknown commands."""
import subprocess


def test_version_prints_name_and_version(autopatch_bin):
    out = subprocess.run([autopatch_bin, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("autopatch ")


def test_unknown_command_exits_2_with_usage(autopatch_bin):
    out = subprocess.run([autopatch_bin, "frobnicate"], capture_output=True, text=True)
    assert out.returncode == 2
    assert 'unknown command "frobnicate"' in out.stderr
    assert "usage: autopatch" in out.stderr
