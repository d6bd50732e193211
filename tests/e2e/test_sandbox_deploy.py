"""deploy/install-runsc.sh on a copy of daemon.json (--daemon-json, --no-reload): it merges a
runsc entry with python3's json module, keeps everything else, is idempotent, and never
touches a file it cannot parse. The live registration is what every runsc test relies on."""
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy/install-runsc.sh"
WANT = {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none"]}


def install(daemon_json, *args):
    return subprocess.run([str(SCRIPT), "--daemon-json", str(daemon_json), "--no-reload",
                           "--no-install", "--runsc", "/usr/bin/runsc", *args],
                          capture_output=True, text=True, timeout=60)


def test_merges_into_an_existing_daemon_json(tmp_path):
    f = tmp_path / "daemon.json"
    other = {"log-driver": "journald", "default-ulimits": {"nofile": {"Name": "nofile",
                                                                      "Hard": 64, "Soft": 64}},
             "runtimes": {"crun": {"path": "/usr/bin/crun"}}}
    f.write_text(json.dumps(other))
    r = install(f)
    assert r.returncode == 0, r.stderr
    assert "registered runsc" in r.stderr
    conf = json.loads(f.read_text())
    assert conf["runtimes"]["runsc"] == WANT
    assert conf["runtimes"]["crun"] == {"path": "/usr/bin/crun"}
    assert conf["log-driver"] == "journald" and conf["default-ulimits"] == other["default-ulimits"]
    assert json.loads((tmp_path / "daemon.json.autopatch-bak").read_text()) == other
    # A second run changes nothing.
    before = f.read_text()
    r = install(f)
    assert r.returncode == 0 and "already registered" in r.stderr, r.stderr
    assert f.read_text() == before
    # Another platform replaces only the runsc entry.
    r = install(f, "--platform", "systrap")
    assert r.returncode == 0, r.stderr
    conf = json.loads(f.read_text())
    assert conf["runtimes"]["runsc"]["runtimeArgs"] == ["--platform=systrap", "--network=none"]
    assert conf["runtimes"]["crun"] == {"path": "/usr/bin/crun"}


def test_creates_a_missing_or_empty_file(tmp_path):
    f = tmp_path / "etc" / "docker" / "daemon.json"
    r = install(f)
    assert r.returncode == 0, r.stderr
    assert json.loads(f.read_text()) == {"runtimes": {"runsc": WANT}}
    f.write_text("\n")
    r = install(f)
    assert r.returncode == 0, r.stderr
    assert json.loads(f.read_text()) == {"runtimes": {"runsc": WANT}}


def test_refuses_a_file_it_cannot_parse(tmp_path):
    for text in ('{"debug": true,', '["runtimes"]', '{"runtimes": []}'):
        f = tmp_path / "daemon.json"
        f.write_text(text)
        r = install(f)
        assert r.returncode == 1, (text, r.stderr)
        assert "nothing was changed" in r.stderr
        assert f.read_text() == text
    r = install(tmp_path / "d.json", "--platform", "bogus")
    assert r.returncode == 1 and "unknown platform" in r.stderr


def test_the_live_daemon_lists_runsc_as_the_script_registers_it():
    # bootstrap.sh calls the script: the running dockerd must have runsc with these arguments.
    conf = json.loads(pathlib.Path("/etc/docker/daemon.json").read_text())
    assert conf["runtimes"]["runsc"]["runtimeArgs"] == WANT["runtimeArgs"]
    out = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"],
                         capture_output=True, text=True, timeout=30)
    assert "runsc" in json.loads(out.stdout)
