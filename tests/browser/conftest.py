"""Browser tests of the console: the real `autopatch` binary and the stand-ins, driven in
Debian's headless Chromium by playwright-core (tests/browser/package.json, installed by
scripts/bootstrap.sh; never a downloaded browser). scripts/test.sh runs them as their own step;
screenshots land in build-results/browser/."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "browser"
sys.path.insert(0, str(ROOT / "standins"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))


@pytest.fixture(scope="session")
def autopatch_bin():
    path = pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build")) / "autopatch"
    assert path.exists(), f"{path} is missing: build first (scripts/test.sh does)"
    return path


@pytest.fixture(scope="session")
def browser():
    """browser(scenario, **cfg) -> the scenario's data; fails the test with the browser's
    error (and the scenario's stack) when it threw."""
    assert pathlib.Path("/usr/bin/chromium").exists(), "apt-get install chromium (bootstrap)"
    assert (HERE / "node_modules" / "playwright-core").exists(), \
        "npm ci in tests/browser (scripts/bootstrap.sh)"
    shots = os.environ.get("AP_SCREENSHOTS", str(ROOT / "build-results" / "browser"))

    def run(scenario, timeout=400, **cfg):
        env = dict(os.environ, AP_BROWSER_CONFIG=json.dumps(cfg), AP_SCREENSHOTS=shots)
        out = subprocess.run(["node", str(HERE / "drive.mjs"), str(HERE / scenario)],
                             cwd=HERE, env=env, capture_output=True, text=True, timeout=timeout)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"no result from {scenario}: {out.stdout[-2000:]} {out.stderr[-3000:]}"
        res = json.loads(lines[-1])
        assert res["ok"], res["error"]
        return res["data"]
    return run
