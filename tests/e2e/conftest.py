"""Shared fixtures for the black-box end-to-end tests.

Tests start the real `autopatch` binary (from $AP_BUILD_DIR, default ./build) against real
SQLite, the real Docker engine, a real git server and the local GitHub / model stand-ins in
standins/. Area-specific helpers live in tests/e2e/<area>_util.py, not here.
"""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "standins"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

# The sandbox backend every sandbox_factory test runs on, and the Kubernetes API stand-in.
from sandbox_util import backend, k8s_stub  # noqa: E402,F401
from ports import free_port  # noqa: E402


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("AP_BUILD_DIR", ROOT / "build"))


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def autopatch_bin() -> pathlib.Path:
    path = build_dir() / "autopatch"
    assert path.exists(), f"{path} is missing: build first (scripts/test.sh does)"
    return path




@pytest.fixture
def port() -> int:
    return free_port()
