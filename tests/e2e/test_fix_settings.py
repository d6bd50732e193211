"""`autopatch fix` reads the repository's .github/autopatch.yml with the pipeline's loader and
picks the test command with the pipeline's detector, so fix and serve run a repository the same
way (issue 10 item 8). The full runs use the scripted model and the real Docker sandbox; the
runs that only check what fix decided stop at an unreachable Docker daemon, right after the
settings are printed."""
import json
import subprocess

import pytest

from agents_util import happy, make_calc_repo, run_fix

SUITE = "python3 -m pytest -q -p no:cacheprovider tests"
# A Makefile the detector would choose (the pipeline's precedence): the file's `test:` wins.
DECOY_MAKEFILE = "test:\n\t@echo this is not the configured test command; exit 1\n"


def fix_until_sandbox(autopatch_bin, tmp_path, extra_files, args=()):
    """Run `autopatch fix` on a calc repository with extra_files; Docker is unreachable, so it
    ends after reading the settings and choosing the test command."""
    repo = make_calc_repo(tmp_path, extra_files)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "DOCKER_HOST": "unix://%s" % (tmp_path / "no-docker.sock")}
    return subprocess.run([str(autopatch_bin), "fix", "--repo", str(repo), "--issue", "x"]
                          + list(args), cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)


def test_test_command_from_the_settings_file_is_used_and_named(autopatch_bin, tmp_path):
    config = 'setup: "true"\ntest: %s\nmax_iterations: 2\n' % SUITE
    r = run_fix(autopatch_bin, tmp_path, happy(), "openai",
                extra_files={".github/autopatch.yml": config, "Makefile": DECOY_MAKEFILE})
    assert r.code == 0, r
    assert "settings from .github/autopatch.yml: setup, test, max_iterations\n" in r.out, r
    assert "test command: %s (from .github/autopatch.yml)\n" % SUITE in r.out, r
    # the Tester really ran it, on pristine and patched code
    assert "**Test suite** `%s`, on the patched code with the repository's own tests" % SUITE \
        in r.out, r
    assert "(per-test results from JUnit XML" in r.out, r
    assert "| pristine | 7 | 0 | 0 | 0 | 0 |" in r.out and "| patched | 7 | 0 | 0 | 0 | 0 |" in r.out, r
    start = json.loads(r.traj_path.read_text().splitlines()[0])
    assert start["type"] == "start" and start["test_command"] == SUITE
    assert start["max_iterations"] == 2
    assert "PROVEN" in r.out


def test_paths_deny_in_the_settings_file_refuses_the_patch(autopatch_bin, tmp_path):
    # The Tester's policy hook refuses the diff before it is tested; one round ends the run.
    config = "test: python3 -m pytest -q\nmax_iterations: 1\npaths:\n  deny: [\"calc.py\"]\n"
    r = run_fix(autopatch_bin, tmp_path, happy(), "openai",
                extra_files={".github/autopatch.yml": config})
    assert r.code == 1, r
    assert "settings from .github/autopatch.yml: test, max_iterations, paths\n" in r.out, r
    rule = ("the patch changes `calc.py`: `calc.py` is refused by the paths.deny glob "
            "`calc.py` in .github/autopatch.yml")
    assert "[testing] round 1: rejected - " + rule in r.out, r
    assert "NOT PROVEN: the Tester rejected the patch in all 1 rounds; last verdict: " + rule \
        in r.out, r
    assert "\nPROVEN:" not in r.out
    assert not r.out_path.exists()
    # the patch was never tested: the policy runs before the patched tree exists; only the
    # baseline (the suite on pristine, before any model call) ran
    events = [json.loads(line) for line in r.traj_path.read_text().splitlines()]
    runs = [e for e in events if e["type"] == "tester_run"]
    assert runs and all(e["dir"] == "/tmp/trees/pristine" for e in runs), runs
    assert not [e for e in runs if e.get("kind") != "tree" and e["command"] != "python3 -m pytest -q"], runs


def test_detection_is_the_pipelines(autopatch_bin, tmp_path):
    # calc has pytest tests and a conftest.py; with a Makefile test target the pipeline has
    # always chosen `make test`, and now fix does too.
    p = fix_until_sandbox(autopatch_bin, tmp_path, {"Makefile": "test:\n\tpython3 -m pytest\n"})
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "test command: make test (detected: Makefile target test)\n" in p.stdout, p.stdout
    assert "settings from" not in p.stdout  # there is no settings file
    assert "cannot reach the Docker daemon" in p.stderr, p.stderr


def test_documented_command_is_detected(autopatch_bin, tmp_path):
    agents = "# Notes for agents\n\n## Testing\n\n```sh\n%s\n```\n" % SUITE
    p = fix_until_sandbox(autopatch_bin, tmp_path, {"AGENTS.md": agents})
    assert 'test command: %s (detected: AGENTS.md section "Testing")\n' % SUITE in p.stdout, \
        p.stdout


def test_flags_win_over_the_file_and_say_so(autopatch_bin, tmp_path):
    config = "setup: pip install -e .\ntest: make test\nmax_iterations: 3\nnetwork: [pypi.org]\n"
    p = fix_until_sandbox(autopatch_bin, tmp_path, {".github/autopatch.yml": config},
                          args=["--test", "python3 -m pytest", "--max-iterations", "1"])
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert ("settings from .github/autopatch.yml: setup, test (overridden by --test), "
            "max_iterations (overridden by --max-iterations), network\n") in p.stdout, p.stdout
    assert "test command: python3 -m pytest (from --test)\n" in p.stdout


def test_invalid_settings_file_exits_2_with_the_pipelines_message(autopatch_bin, tmp_path):
    # The same sentence the pipeline posts (tests/e2e/test_pipeline.py quotes it too).
    p = fix_until_sandbox(autopatch_bin, tmp_path, {
        ".github/autopatch.yml": "test: python3 -m pytest -q\nmax_iteration: 3\n"})
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert ("autopatch fix: .github/autopatch.yml line 2: `max_iteration: 3`: unknown key "
            "\"max_iteration\"") in p.stderr, p.stderr
    assert "test command" not in p.stdout


def test_linked_settings_file_is_refused(autopatch_bin, tmp_path):
    outside = tmp_path / "elsewhere.yml"
    outside.write_text("test: 'true'\n")
    repo = make_calc_repo(tmp_path)
    (repo / ".github").mkdir()
    (repo / ".github" / "autopatch.yml").symlink_to(outside)
    p = subprocess.run([str(autopatch_bin), "fix", "--repo", str(repo), "--issue", "x"],
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "`.github/autopatch.yml` is or goes through a symbolic link" in p.stderr, p.stderr
    assert "'true'" not in p.stdout + p.stderr


@pytest.mark.parametrize("setting,value", [
    ("AUTOPATCH_TESTER_SPARES", "9"),
    ("AUTOPATCH_TESTER_SIDE_BY_SIDE", "maybe"),
    ("AUTOPATCH_MAX_DIFF_LINES", "many"),
])
def test_a_bad_tester_setting_stops_fix_before_any_box(autopatch_bin, tmp_path, setting, value):
    # Checked at start-up (job/run_config.c run_config_check_settings; serve does the same in
    # pipeline_new), not when the first job reaches the Tester after its model calls.
    repo = make_calc_repo(tmp_path, {})
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), setting: value,
           "DOCKER_HOST": "unix://%s" % (tmp_path / "no-docker.sock")}
    r = subprocess.run([str(autopatch_bin), "fix", "--repo", str(repo), "--issue", "x"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and setting in lines[0], r.stderr
    assert "docker" not in r.stderr.lower(), r.stderr  # stopped before the engine
