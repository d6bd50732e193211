"""Real environments (issue 12): toolchain flavours, the setup phase against real package
servers reached only through the egress proxy, the per-repository environment cache, the
offline agent phase and its blocked-egress report, and the environment errors that end a job
before any model call.

The package servers run in containers on an outer Docker network of the test's own (the proxy
joins it through AUTOPATCH_EGRESS_NETWORK; AUTOPATCH_EGRESS_ALLOW_NETS opens exactly that
subnet): a simple-repository Python index (python3 -m http.server over /simple/<name>/, holding
a wheel this test builds) as pypi.autopatch.test, and verdaccio (standins/verdaccio, installed
by scripts/bootstrap.sh) as npm.autopatch.test, to which the test publishes its own package.
Each server's access log tells whether a setup ran (the marker a cached job must not leave).
"""
import base64
import copy
import hashlib
import io
import json
import os
import pathlib
import re
import subprocess
import time
import urllib.request
import uuid
import zipfile

import pytest

from agents_util import (CALC, brief, call, containers_of, fix_env, happy, make_calc_repo,
                         new_owner, step)
from model_stub import StubServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERDACCIO = ROOT / "standins" / "verdaccio"
PY_IMAGE = "autopatch-sandbox:python"
NODE_IMAGE = "autopatch-sandbox:node"
PYPI = "pypi.autopatch.test:8080"
NPM = "npm.autopatch.test:4873"

GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")


def docker(*args, check=True, timeout=120):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def have_image(name):
    return docker("image", "inspect", name, check=False).returncode == 0


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV,
                   capture_output=True)


def commit_all(repo, msg="change"):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", msg)


# ---- the package servers ----

def build_wheel(name, version, module_text):
    """A pure-Python wheel made by hand: the module, METADATA, WHEEL and RECORD."""
    files = {
        f"{name}.py": module_text.encode(),
        f"{name}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: autopatch-test\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return buf.getvalue()


VERDACCIO_CONFIG = """\
storage: /conf/storage
auth:
  htpasswd:
    file: /conf/htpasswd
    max_users: 10
uplinks: {}
packages:
  '**':
    access: $all
    publish: $authenticated
logs: {type: stdout, format: pretty, level: http}
"""


def wait_http(url, timeout=60):
    end = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read()
        except Exception:
            if time.time() > end:
                raise
            time.sleep(0.5)


def http_json(method, url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    for image in (PY_IMAGE, NODE_IMAGE):
        if not have_image(image):
            pytest.fail(f"{image} is missing: deploy/sandbox-image/build.sh --flavor "
                        f"{image.split(':')[1]} (scripts/test.sh builds it)")
    if not (VERDACCIO / "node_modules" / "verdaccio").is_dir():
        pytest.fail("standins/verdaccio is not installed: run scripts/bootstrap.sh")
    tmp = tmp_path_factory.mktemp("servers")
    tag = "apenv-" + uuid.uuid4().hex[:10]
    outer = tag + "-net"
    labels = ["--label", "autopatch-test=environments"]
    w = {"outer": outer, "names": []}
    docker("network", "create", *labels, outer)
    try:
        # The Python index: /simple/aphelper/ lists the wheel this test built.
        simple = tmp / "pypi" / "simple" / "aphelper"
        simple.mkdir(parents=True)
        wheel = build_wheel("aphelper", "1.0", "VERSION = '1.0'\n\ndef double(x):\n    return 2 * x\n")
        wname = "aphelper-1.0-py3-none-any.whl"
        (simple / wname).write_bytes(wheel)
        (simple / "index.html").write_text(
            '<!DOCTYPE html><html><body><a href="%s#sha256=%s">%s</a></body></html>\n'
            % (wname, hashlib.sha256(wheel).hexdigest(), wname))
        (tmp / "pypi" / "simple" / "index.html").write_text(
            '<!DOCTYPE html><html><body><a href="aphelper/">aphelper</a></body></html>\n')
        os.chmod(tmp, 0o755)
        for p in (tmp / "pypi").rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        name = tag + "-pypi"
        docker("run", "-d", "--name", name, "--network", outer, "--network-alias",
               PYPI.split(":")[0], *labels, "-v", f"{tmp / 'pypi'}:/srv:ro", PY_IMAGE,
               "python3", "-u", "-m", "http.server", "8080", "--directory", "/srv")
        w["names"].append(name)
        w["pypi"] = name
        # verdaccio: a real npm registry, storage in the test's temp dir.
        conf = tmp / "verdaccio"
        (conf / "storage").mkdir(parents=True)
        (conf / "config.yaml").write_text(VERDACCIO_CONFIG)
        name = tag + "-npm"
        docker("run", "-d", "--name", name, "--network", outer, "--network-alias",
               NPM.split(":")[0], *labels, "--user", "0", "-e", "HOME=/conf",
               "-v", f"{VERDACCIO}:/app:ro", "-v", f"{conf}:/conf", NODE_IMAGE,
               "node", "/app/node_modules/verdaccio/bin/verdaccio", "--config",
               "/conf/config.yaml", "--listen", "0.0.0.0:4873")
        w["names"].append(name)
        w["npm"] = name
        info = json.loads(docker("network", "inspect", outer).stdout)[0]
        w["subnet"] = info["IPAM"]["Config"][0]["Subnet"]
        ips = {n: c["IPv4Address"].split("/")[0] for n, c in
               ((c["Name"], c) for c in info["Containers"].values())}
        w["pypi_url"] = f"http://{ips[w['pypi']]}:8080"
        w["npm_url"] = f"http://{ips[w['npm']]}:4873"
        wait_http(w["pypi_url"] + "/simple/")
        wait_http(w["npm_url"] + "/-/ping", timeout=90)
        w["npm_lock"] = publish_aplib(tmp, w["npm_url"])
        yield w
    finally:
        for n in w["names"]:
            docker("rm", "-f", n, check=False)
        docker("network", "rm", outer, check=False)


def publish_aplib(tmp, registry):
    """Publish the test's own package `aplib` with `npm publish --registry`; return the
    lockfile entry (resolved under the registry's name, integrity from the registry)."""
    token = http_json("PUT", registry + "/-/user/org.couchdb.user:tester",
                      {"name": "tester", "password": "tester-" + uuid.uuid4().hex})["token"]
    pkg = tmp / "aplib"
    pkg.mkdir()
    (pkg / "package.json").write_text(json.dumps(
        {"name": "aplib", "version": "1.0.0", "main": "index.js", "license": "MIT"}))
    (pkg / "index.js").write_text("exports.sum = (v) => v.reduce((a, b) => a + b, 0);\n")
    host = registry.split("//", 1)[1]
    npmrc = tmp / "npmrc"
    npmrc.write_text(f"//{host}/:_authToken={token}\n")
    subprocess.run(["npm", "publish", "--registry", registry + "/", "--userconfig", str(npmrc)],
                   cwd=pkg, check=True, capture_output=True, timeout=120)
    meta = http_json("GET", registry + "/aplib")
    dist = meta["versions"]["1.0.0"]["dist"]
    return {"version": "1.0.0",
            "resolved": f"http://{NPM}/aplib/-/aplib-1.0.0.tgz",
            "integrity": dist["integrity"]}


def access_count(container, needle):
    logs = docker("logs", container, check=False)
    return (logs.stdout + logs.stderr).count(needle)


# ---- running `autopatch fix` ----

def run_fix(autopatch_bin, home, repo, script, env=None, args=(), timeout=400):
    """`autopatch fix` on repo with a scripted model; data dir (and so the cache) in home."""
    stub = StubServer(script).start()
    owner = new_owner()
    e = fix_env(home, stub, "openai", owner, env)
    cmd = [str(autopatch_bin), "fix", "--repo", str(repo), "--issue-file",
           str(repo / "ISSUE.md"), "--out", str(home / "patch.diff")] + list(args)
    try:
        proc = subprocess.run(cmd, cwd=home, env=e, capture_output=True, text=True,
                              timeout=timeout)
        requests = stub.requests()
    finally:
        stub.stop()
    assert not containers_of(owner), "containers left behind"
    proc.requests = requests
    return proc


def egress_env(servers):
    return {"AUTOPATCH_EGRESS_NETWORK": servers["outer"],
            "AUTOPATCH_EGRESS_ALLOW_NETS": servers["subnet"]}


PY_SETUP = ("pip install --user --break-system-packages --no-cache-dir --index-url "
            f"http://{PYPI}/simple/ --trusted-host {PYPI.split(':')[0]} -r requirements.txt")

PY_CONFIG = f"""\
setup:
  - {PY_SETUP}
network: ["{PYPI}"]
test: python3 -m pytest -q
"""

HELPER_TEST = """\
import aphelper


def test_the_wheel_from_the_index_is_installed():
    assert aphelper.double(21) == 42
"""

NET_PROBE = ("python3 -c \"import urllib.request; "
             f"urllib.request.urlopen('http://{PYPI}/simple/aphelper/')\"")


def py_repo(tmp_path):
    repo = make_calc_repo(tmp_path, {
        ".github/autopatch.yml": PY_CONFIG,
        "requirements.txt": "aphelper==1.0\n",
        "tests/test_helper.py": HELPER_TEST,
    })
    (repo / "ISSUE.md").write_text((CALC / "ISSUE.md").read_text())
    commit_all(repo, "issue")
    return repo


def py_script(probe_network=False):
    s = brief()
    if probe_network:
        s["builder"].insert(1, step(call("run", command=NET_PROBE)))
    return s


def test_python_setup_from_a_local_index_cache_hit_and_lockfile_change(
        servers, autopatch_bin, tmp_path):
    repo = py_repo(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = egress_env(servers)
    before = access_count(servers["pypi"], "GET /simple/aphelper/")

    # 1. setup pip-installs the wheel through the proxy; the Builder's network try is refused.
    r1 = run_fix(autopatch_bin, home, repo, py_script(probe_network=True), env)
    assert r1.returncode == 0, r1.stdout + r1.stderr[-3000:]
    assert "flavour python: requirements.txt in the checkout" in r1.stdout
    assert "setup ran (" in r1.stdout
    assert "environment cached (key" in r1.stdout
    assert "network off: the egress allow-list ended with setup" in r1.stdout
    assert "PROVEN" in r1.stdout
    after1 = access_count(servers["pypi"], "GET /simple/aphelper/")
    assert after1 > before, "setup did not reach the index"
    # The agent phase was offline, and the refused connection is reported with its fix.
    assert "BLOCKED network connections" in r1.stdout
    blocked = r1.stdout.split("BLOCKED network connections", 1)[1]
    assert f"{PYPI}, 1 time, during the agent phase by `{NET_PROBE}`" in blocked
    assert "agent_network: true" in blocked
    run_results = [t for req in r1.requests if req["role"] == "builder"
                   for t in __import__("agents_util").tool_results(req)]
    assert any("403" in t or "Forbidden" in t for t in run_results), run_results[-3:]
    # The patch holds the fix only: nothing setup produced (.local/) is in it.
    diff = (home / "patch.diff").read_text()
    assert ".local/" not in diff and "calc.py" in diff

    # 2. The same repository again: the cache replaces setup; the index sees nothing.
    r2 = run_fix(autopatch_bin, home, repo, py_script(), env)
    assert r2.returncode == 0, r2.stdout + r2.stderr[-3000:]
    assert "environment restored from cache (key" in r2.stdout
    assert "setup ran (" not in r2.stdout
    assert access_count(servers["pypi"], "GET /simple/aphelper/") == after1
    assert "PROVEN" in r2.stdout

    # 3. A changed lockfile is another key: setup runs again.
    (repo / "requirements.txt").write_text("# pinned\naphelper==1.0\n")
    commit_all(repo, "requirements")
    r3 = run_fix(autopatch_bin, home, repo, py_script(), env)
    assert r3.returncode == 0, r3.stdout + r3.stderr[-3000:]
    assert "setup ran (" in r3.stdout and "restored from cache" not in r3.stdout
    assert access_count(servers["pypi"], "GET /simple/aphelper/") > after1

    # The cache lists both keys of this repository; clear empties it.
    ls = subprocess.run([str(autopatch_bin), "cache", "list"], capture_output=True, text=True,
                        env={"PATH": os.environ["PATH"], "AUTOPATCH_DATA_DIR": str(home / "data"),
                             "AUTOPATCH_ENV_FILE": "/dev/null"})
    assert ls.returncode == 0, ls.stderr
    assert ls.stdout.count(str(repo)) == 2, ls.stdout
    cl = subprocess.run([str(autopatch_bin), "cache", "clear"], capture_output=True, text=True,
                        env={"PATH": os.environ["PATH"], "AUTOPATCH_DATA_DIR": str(home / "data"),
                             "AUTOPATCH_ENV_FILE": "/dev/null"})
    assert cl.returncode == 0 and "removed 2" in cl.stdout, cl.stdout + cl.stderr


# ---- JavaScript: npm ci against verdaccio, in the node flavour ----

JS_CALC = """\
const { sum } = require('aplib');

function mean(values) {
  return sum(values) / values.length;
}

module.exports = { mean };
"""

JS_TEST = """\
const test = require('node:test');
const assert = require('node:assert');
const { mean } = require('../calc');

test('mean of three numbers', () => {
  assert.strictEqual(mean([1, 2, 3]), 2);
});
"""

JS_REPRO = """\
const test = require('node:test');
const assert = require('node:assert');
const { mean } = require('../calc');

test('mean of an empty list is 0', () => {
  assert.strictEqual(mean([]), 0);
});
"""


def js_repo(tmp_path, lock_entry):
    repo = tmp_path / "jsproj"
    (repo / "test").mkdir(parents=True)
    (repo / ".github").mkdir()
    pkg = {"name": "jsproj", "version": "1.0.0", "private": True,
           "scripts": {"test": "node --test"}, "dependencies": {"aplib": "1.0.0"}}
    (repo / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
    lock = {"name": "jsproj", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "jsproj", "version": "1.0.0",
                              "dependencies": {"aplib": "1.0.0"}},
                         "node_modules/aplib": lock_entry}}
    (repo / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    (repo / ".npmrc").write_text(f"registry=http://{NPM}/\n")
    (repo / "calc.js").write_text(JS_CALC)
    (repo / "test" / "calc.test.js").write_text(JS_TEST)
    (repo / ".github" / "autopatch.yml").write_text(
        f"setup: npm ci --no-audit --no-fund\nnetwork: [\"{NPM}\"]\n")
    (repo / "ISSUE.md").write_text("# mean([]) returns NaN\n\ncalc.mean([]) should be 0.\n")
    git(repo, "init", "-q")
    commit_all(repo, "init")
    return repo


def js_script():
    return {
        "planner": [{"text": "Cause: mean divides by values.length, 0 for []. Fix: return 0 "
                             "for an empty list. Test: test/mean_empty.test.js."}],
        "builder": [
            step(call("write_file", path="test/mean_empty.test.js", content=JS_REPRO)),
            step(call("replace_in_file", path="calc.js",
                      old="  return sum(values) / values.length;\n",
                      new="  if (values.length === 0) return 0;\n"
                          "  return sum(values) / values.length;\n")),
            step(call("run", command="npm test")),
            step(call("finish", test_path="test/mean_empty.test.js",
                      test_command="node --test test/mean_empty.test.js",
                      summary="mean([]) is 0")),
            {"text": "Done."},
        ],
    }


def test_javascript_npm_ci_against_verdaccio_in_the_node_flavour(servers, autopatch_bin,
                                                                 tmp_path):
    repo = js_repo(tmp_path, servers["npm_lock"])
    home = tmp_path / "home"
    home.mkdir()
    env = egress_env(servers)
    before = access_count(servers["npm"], "aplib-1.0.0.tgz")
    r1 = run_fix(autopatch_bin, home, repo, js_script(), env)
    assert r1.returncode == 0, r1.stdout + r1.stderr[-3000:]
    assert "sandbox image autopatch-sandbox:node (flavour node: package.json in the checkout)" \
        in r1.stdout
    assert "setup ran (" in r1.stdout and "PROVEN" in r1.stdout
    assert access_count(servers["npm"], "aplib-1.0.0.tgz") > before
    diff = (home / "patch.diff").read_text()
    assert "node_modules" not in diff and "calc.js" in diff
    # Again: restored, and verdaccio is not asked for the tarball.
    seen = access_count(servers["npm"], "aplib-1.0.0.tgz")
    r2 = run_fix(autopatch_bin, home, repo, js_script(), env)
    assert r2.returncode == 0, r2.stdout + r2.stderr[-3000:]
    assert "environment restored from cache" in r2.stdout and "setup ran (" not in r2.stdout
    assert access_count(servers["npm"], "aplib-1.0.0.tgz") == seen


# ---- environment errors: a sentence, and zero model calls ----

def error_repo(tmp_path, config):
    repo = make_calc_repo(tmp_path, {".github/autopatch.yml": config})
    (repo / "ISSUE.md").write_text((CALC / "ISSUE.md").read_text())
    commit_all(repo, "issue")
    return repo


def test_missing_image_names_docker_pull_before_any_model_call(autopatch_bin, tmp_path):
    repo = error_repo(tmp_path, "image: autopatch-test/absent-image:1\n")
    r = run_fix(autopatch_bin, tmp_path, repo, happy())
    assert r.returncode == 3, r.stdout  # an environment failure
    assert "ENVIRONMENT FAILURE (no model call was made): " in r.stdout
    assert ("the sandbox image autopatch-test/absent-image:1 (`image: autopatch-test/"
            "absent-image:1` in .github/autopatch.yml) is not on the autopatch host's Docker "
            "engine, and autopatch never pulls: run `docker pull autopatch-test/absent-image:1`"
            ) in r.stdout
    assert r.requests == []


def test_missing_flavour_names_its_build_command(autopatch_bin, tmp_path):
    """With first-use builds off (they are on by default: tests/e2e/test_toolchains.py)."""
    repo = error_repo(tmp_path, "image: rust\n")
    r = run_fix(autopatch_bin, tmp_path, repo, happy(),
                {"AUTOPATCH_FLAVOR_REPOSITORY": "autopatch-test-absent",
                 "AUTOPATCH_SANDBOX_BUILD": "off"})
    assert r.returncode == 3, r.stdout  # an environment failure
    assert "ENVIRONMENT FAILURE (no model call was made): " in r.stdout
    assert ("the sandbox image autopatch-test-absent:rust for the rust flavour (`image: rust` "
            "in .github/autopatch.yml) is not built on this host, and "
            "AUTOPATCH_SANDBOX_BUILD=off keeps this host from building it on first use: build "
            "it with `deploy/sandbox-image/build.sh --flavor rust`") in r.stdout
    assert r.requests == []


def test_failed_setup_stops_with_status_and_tail_before_any_model_call(autopatch_bin, tmp_path):
    repo = error_repo(tmp_path, "setup:\n  - echo preparing\n  - echo 'no such package' >&2; exit 3\n")
    r = run_fix(autopatch_bin, tmp_path, repo, happy())
    assert r.returncode == 3, r.stdout  # an environment failure
    assert "ENVIRONMENT FAILURE (no model call was made): " in r.stdout
    assert "ENVIRONMENT FAILURE (no model call was made): setup failed: `echo 'no such package' >&2; exit 3` exited with 3" in r.stdout
    assert "no such package" in r.stdout.split("ENVIRONMENT FAILURE", 1)[1]
    assert "[setup] setup 1/2 `echo preparing` done" in r.stdout
    assert r.requests == []


def test_missing_toolchain_command_names_the_flavour(autopatch_bin, tmp_path):
    repo = error_repo(tmp_path, "image: python\nsetup: npm ci\n")
    r = run_fix(autopatch_bin, tmp_path, repo, happy())
    assert r.returncode == 3, r.stdout  # an environment failure
    assert "ENVIRONMENT FAILURE (no model call was made): " in r.stdout
    assert ("the setup step `npm ci` needs `npm`, which the sandbox image "
            "autopatch-sandbox:latest (flavour python: `image: python` in "
            ".github/autopatch.yml) does not have; the node flavour has it: add `image: node` "
            "to .github/autopatch.yml") in r.stdout
    assert r.requests == []


# ---- the same through the server: the progress comment ----

@pytest.fixture
def rig_factory(tmp_path, autopatch_bin):
    from pipeline_util import Rig
    rigs = []

    def make(files):
        rig = Rig(tmp_path / f"rig{len(rigs)}", autopatch_bin, files=files)
        rig.tmp.mkdir(parents=True)
        rigs.append(rig)
        return rig.start()

    yield make
    for r in rigs:
        r.stop()


def progress_text(rig):
    bodies = [c["body"] for c in rig.bot_comments(1) if "autopatch:progress" in c["body"]]
    assert len(bodies) == 1, bodies
    return bodies[0]


def test_server_failed_setup_ends_the_job_in_the_comment_before_any_model_call(rig_factory):
    rig = rig_factory({".github/autopatch.yml":
                       "setup:\n  - echo broken-dependency >&2; exit 4\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 180, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed"
    assert rig.model.requests() == [], "no model call after a failed setup"
    text = progress_text(rig)
    assert ("**Environment:** sandbox image autopatch-sandbox:latest (flavour python: "
            "conftest.py in the checkout)") in text
    assert ("environment failure: setup failed: `echo broken-dependency >&2; exit 4` exited "
            "with 4") in text, text
    assert "broken-dependency" in text.split("setup failed", 1)[1]
    rig.wait(lambda: rig.boxes_left(1) == [], 60, "no container of the job left")


def test_server_missing_image_names_docker_pull_before_any_model_call(rig_factory):
    rig = rig_factory({".github/autopatch.yml": "image: autopatch-test/absent-image:1\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 180, "the job to fail")
    assert rig.jobs()[0]["state"] == "failed"
    assert rig.model.requests() == []
    text = progress_text(rig)
    assert "environment failure: the sandbox image autopatch-test/absent-image:1" in text, text
    assert "run `docker pull autopatch-test/absent-image:1` there" in text


def test_server_setup_runs_then_the_fix_is_proven(rig_factory):
    rig = rig_factory({".github/autopatch.yml":
                       "setup: mkdir -p .venv && echo ok > .venv/marker\n"})
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job")
    assert rig.jobs()[0]["state"] == "succeeded", progress_text(rig)
    text = progress_text(rig)
    assert "setup ran (" in text and "**Environment:**" in text
    assert not any(".venv" in p for p in rig.branch_files("autopatch/issue-1"))
    # The image's toolchain versions (its labels) in the comment and in the PR body.
    image = re.search(r"sandbox image (\S+) \(flavour python", text).group(1)
    versions = docker("image", "inspect", "--format",
                      '{{index .Config.Labels "autopatch.toolchain"}}', image).stdout.strip()
    assert versions.startswith("python 3."), f"rebuild {image} with build.sh (labels)"
    assert re.search(r"^\*\*Environment:\*\* sandbox image .*; toolchain "
                     + re.escape(versions) + r" \(Debian \w+\); setup ran", text, re.M), text
    body = rig.pulls()[0]["body"]
    assert re.search(r"^Environment: sandbox image .*; toolchain " + re.escape(versions)
                     + r" \(Debian \w+\)", body, re.M), body


# ---- the cache's size cap: the least recently used entries go ----

# 1.2 MB of setup products per repository (random bytes: the archive cannot be smaller).
BLOB_SETUP = "mkdir -p .venv && head -c 1200000 /dev/urandom > .venv/blob"


def cached_key(out):
    m = re.search(r"environment cached \(key ([0-9a-f]{12})", out)
    assert m, out
    return m.group(1)


def cache_cli(autopatch_bin, home, *args):
    r = subprocess.run([str(autopatch_bin), "cache", *args], capture_output=True, text=True,
                       env={"PATH": os.environ["PATH"], "AUTOPATCH_DATA_DIR": str(home / "data"),
                            "AUTOPATCH_ENV_FILE": "/dev/null"})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_cache_size_cap_evicts_the_least_recently_used(autopatch_bin, tmp_path):
    """Three repositories' environments of 1.2 MB under a 3 MiB cap: storing the third pushes
    out the one least recently *used* - a restore counts - not the one stored first."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"AUTOPATCH_ENV_CACHE_SIZE": "3m"}
    repos = {n: error_repo(tmp_path / n, f"setup: {BLOB_SETUP}\n")
             for n in ("alpha", "beta", "gamma")}
    keys = {}
    for n in ("alpha", "beta"):
        r = run_fix(autopatch_bin, home, repos[n], brief(), env)
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        keys[n] = cached_key(r.stdout)
        assert "evicted" not in r.stdout
    # alpha again: restored from the cache, which makes beta the least recently used.
    r = run_fix(autopatch_bin, home, repos["alpha"], brief(), env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert f"environment restored from cache (key {keys['alpha']}" in r.stdout
    assert "setup ran (" not in r.stdout
    # gamma does not fit beside both: beta goes, alpha (stored first, used since) stays.
    r = run_fix(autopatch_bin, home, repos["gamma"], brief(), env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    keys["gamma"] = cached_key(r.stdout)
    assert (f"environment cache: evicted key {keys['beta']} (local:{repos['beta']}, least "
            "recently used)") in r.stdout, r.stdout
    assert r.stdout.count("environment cache: evicted key") == 1, r.stdout
    listed = cache_cli(autopatch_bin, home, "list")
    rows = [l for l in listed.splitlines() if l.startswith("local:")]
    assert [l.split()[0] for l in rows] == [f"local:{repos['gamma']}",
                                            f"local:{repos['alpha']}"], listed
    assert [l.split()[1] for l in rows] == [keys["gamma"], keys["alpha"]], listed
    assert "2 environments, 2.4 MB" in listed, listed
    assert all(abs(float(l.split()[2].rstrip("MB")) - 1.2) < 0.05 for l in rows), listed
    # beta's environment is gone: its next job runs setup again (and alpha, now the least
    # recently used, makes room for it).
    r = run_fix(autopatch_bin, home, repos["beta"], brief(), env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "setup ran (" in r.stdout and "restored from cache" not in r.stdout
    assert f"environment cache: evicted key {keys['alpha']} (local:{repos['alpha']}" in r.stdout
    rows = [l.split()[0] for l in cache_cli(autopatch_bin, home, "list").splitlines()
            if l.startswith("local:")]
    assert rows == [f"local:{repos['beta']}", f"local:{repos['gamma']}"], rows


# ---- a flavour built on first use (AUTOPATCH_SANDBOX_BUILD_CMD) ----

# A stand-in for deploy/sandbox-image/build.sh (which takes minutes): it records each call,
# takes a few seconds, and tags the default image as the flavour asked for, under a
# test-only AUTOPATCH_FLAVOR_REPOSITORY.
BUILD_OK = """#!/bin/sh
echo "$$ $*" >> {calls}
echo "[sandbox-image] building {repo}:$2"
sleep 4
docker tag autopatch-sandbox:latest {repo}:$2 || exit 9
echo "[sandbox-image] built {repo}:$2"
"""

BUILD_FAILS = """#!/bin/sh
echo "$$ $*" >> {calls}
echo "[sandbox-image] building {repo}:$2 (12 packages)"
echo "E: mmdebstrap: cannot reach the Debian mirror for {repo}" >&2
exit 7
"""


@pytest.fixture
def build_cmd(tmp_path):
    """make(template) -> (env, calls file): a build command and a flavour repository of this
    test's own, whose tags are removed afterwards."""
    repo = "autopatch-test-build-" + uuid.uuid4().hex[:10]
    n = [0]

    def make(template):
        n[0] += 1
        calls = tmp_path / f"build-calls-{n[0]}"
        script = tmp_path / f"build-{n[0]}.sh"
        script.write_text(template.format(calls=calls, repo=repo))
        script.chmod(0o755)
        return {"AUTOPATCH_FLAVOR_REPOSITORY": repo,
                "AUTOPATCH_SANDBOX_BUILD_CMD": str(script)}, calls

    yield make
    for flavor in ("node", "go", "rust", "java", "c"):
        docker("image", "rm", f"{repo}:{flavor}", check=False)
    assert not docker("images", "-q", repo).stdout.strip(), "test tags left behind"


def test_server_builds_a_missing_flavour_once_for_two_concurrent_jobs(build_cmd, tmp_path,
                                                                      autopatch_bin):
    from pipeline_util import Rig, job_events
    env, calls = build_cmd(BUILD_OK)
    image = env["AUTOPATCH_FLAVOR_REPOSITORY"] + ":go"
    assert not have_image(image)
    rig = Rig(tmp_path / "rig", autopatch_bin, env=env, workers=2, issues=2,
              files={".github/autopatch.yml": "image: go\ntest: python3 -m pytest -q\n"})
    rig.tmp.mkdir(parents=True)
    rig.start()
    try:
        assert rig.label(1) == 202 and rig.label(2) == 202
        rig.wait(lambda: rig.job_done(2), 400, "both jobs")
        events = {j: job_events(rig, j) for j in (1, 2)}
        texts = {}
        for issue in (1, 2):
            bodies = [c["body"] for c in rig.bot_comments(issue)
                      if "autopatch:progress" in c["body"]]
            assert len(bodies) == 1, bodies
            texts[issue] = bodies[0]
        states = sorted(j["state"] for j in rig.jobs())
    finally:
        rig.stop()
    # One build, though both jobs found the image missing and said so while they waited
    # (the second waited on the first's build and found the image built).
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()
    assert "--flavor go" in calls.read_text()
    done = {}
    for j, ev in events.items():
        building = [i for i, m in enumerate(ev) if m == (
            f"building the sandbox image {image} for the go flavour (first use; this takes a "
            "few minutes, one build at a time on this host)")]
        built = [i for i, m in enumerate(ev) if m.startswith(f"built the sandbox image {image} in ")
                 or m == f"the sandbox image {image} was built by another job"]
        assert len(building) == 1 and len(built) == 1 and building[0] < built[0], (j, ev)
        done[j] = ev[built[0]]
    # One built it (its log kept in the data dir), the other waited for that build.
    assert sorted(m.split(" in ")[0] if m.startswith("built") else m for m in done.values()) \
        == [f"built the sandbox image {image}",
            f"the sandbox image {image} was built by another job"], done
    for text in texts.values():
        assert f"sandbox image {image} (flavour go: `image: go` in .github/autopatch.yml)" \
            in text, text
    # The job whose steps the comment still lists in full says it, in order.
    shown = [t for t in texts.values() if f"building the sandbox image {image} for the go" in t]
    assert shown, texts
    assert all(t.index("building the sandbox image") < t.index(f"sandbox image {image} was built")
               if "by another job" in t else
               t.index("building the sandbox image") < t.index(f"built the sandbox image {image}")
               for t in shown)
    assert have_image(image)
    # The built image is used: a job proved its fix in it (the scripted model serves one
    # conversation, so the other job's Planner finds the script used up).
    assert "succeeded" in states, (states, texts)


def test_fix_builds_a_missing_flavour_on_first_use_and_then_reuses_it(build_cmd, autopatch_bin,
                                                                      tmp_path):
    env, calls = build_cmd(BUILD_OK)
    image = env["AUTOPATCH_FLAVOR_REPOSITORY"] + ":go"
    repo = error_repo(tmp_path, "image: go\ntest: python3 -m pytest -q\n")
    r = run_fix(autopatch_bin, tmp_path, repo, brief(), env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = r.stdout
    building = out.index(f"[preparing] building the sandbox image {image} for the go flavour "
                         "(first use")
    built = out.index(f"[preparing] built the sandbox image {image} in ")
    assert building < built < out.index("PROVEN")
    assert len(calls.read_text().splitlines()) == 1
    # Present now: the next job neither builds nor says it does.
    r = run_fix(autopatch_bin, tmp_path, repo, brief(), env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "building the sandbox image" not in r.stdout
    assert len(calls.read_text().splitlines()) == 1


def test_two_fix_runs_sharing_the_data_dir_build_a_missing_flavour_once(build_cmd,
                                                                        autopatch_bin, tmp_path):
    """Two `autopatch fix` processes (no shared memory, so no build_lock between them) with one
    AUTOPATCH_DATA_DIR: the lock file beside the data serialises them, and one build serves
    both."""
    import concurrent.futures
    env, calls = build_cmd(BUILD_OK)
    image = env["AUTOPATCH_FLAVOR_REPOSITORY"] + ":go"
    env["AUTOPATCH_DATA_DIR"] = str(tmp_path / "shared-data")
    runs = []
    for n in ("one", "two"):
        home = tmp_path / n
        home.mkdir()
        runs.append((home, error_repo(home, "image: go\ntest: python3 -m pytest -q\n")))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda hr: run_fix(autopatch_bin, hr[0], hr[1], brief(), env),
                             runs))
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()
    for r in done:
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        assert f"[preparing] building the sandbox image {image} for the go flavour" in r.stdout, \
            r.stdout
        assert "PROVEN" in r.stdout
    assert sorted(f"[preparing] built the sandbox image {image} in " in r.stdout
                  for r in done) == [False, True], [r.stdout for r in done]
    assert any(f"[preparing] the sandbox image {image} was built by another job" in r.stdout
               for r in done), [r.stdout for r in done]


def test_fix_failed_flavour_build_is_an_environment_failure_before_any_model_call(
        build_cmd, autopatch_bin, tmp_path):
    env, calls = build_cmd(BUILD_FAILS)
    image = env["AUTOPATCH_FLAVOR_REPOSITORY"] + ":rust"
    repo = error_repo(tmp_path, "image: rust\n")
    r = run_fix(autopatch_bin, tmp_path, repo, happy(), env)
    assert r.returncode == 3, r.stdout + r.stderr[-2000:]  # an environment failure
    assert f"[preparing] building the sandbox image {image} for the rust flavour (first use" \
        in r.stdout
    assert "built the sandbox image" not in r.stdout
    failure = r.stdout.split("ENVIRONMENT FAILURE (no model call was made): ", 1)
    assert len(failure) == 2, r.stdout
    assert failure[1].startswith(
        f"the sandbox image {image} for the rust flavour (`image: rust` in "
        ".github/autopatch.yml) is not built on this host, and building it on first use "
        f"failed: `{env['AUTOPATCH_SANDBOX_BUILD_CMD']} --flavor rust` exited with 7 after "),\
        failure[1]
    # Its whole output is kept in the data dir.
    log = re.search(r"the build's log is (\S+);", failure[1])
    assert log and "E: mmdebstrap: cannot reach" in pathlib.Path(log.group(1)).read_text()
    # The tail of its output, stdout and stderr both.
    assert f"[sandbox-image] building {image} (12 packages)" in failure[1]
    assert "E: mmdebstrap: cannot reach the Debian mirror" in failure[1]
    assert r.requests == [], "no model call after a failed build"
    assert len(calls.read_text().splitlines()) == 1
    assert not have_image(image)


def test_server_failed_flavour_build_ends_the_job_as_an_environment_failure(build_cmd, tmp_path,
                                                                            autopatch_bin):
    """Through serve: a failed first-use build fails the job once (not retried: another
    attempt would start another build of many minutes), the comment says "environment
    failure" with the command, its exit status and output tail, and no model is called."""
    from pipeline_util import Rig, job_events
    env, calls = build_cmd(BUILD_FAILS)
    image = env["AUTOPATCH_FLAVOR_REPOSITORY"] + ":rust"
    rig = Rig(tmp_path / "rig", autopatch_bin, env=env,
              files={".github/autopatch.yml": "image: rust\n"})
    rig.tmp.mkdir(parents=True)
    rig.start()
    try:
        assert rig.label() == 202
        rig.wait(lambda: rig.job_done(1), 300, "the job to fail")
        jobs = rig.jobs()
        bodies = [c["body"] for c in rig.bot_comments(1) if "autopatch:progress" in c["body"]]
        events = job_events(rig, 1)
        requests = rig.model.requests()
        labels = rig.state()["issues"]["1"]["labels"]
    finally:
        rig.stop()
    assert jobs[0]["state"] == "failed", (jobs, events)
    assert jobs[0]["attempts"] == 1, jobs  # not retried
    assert requests == [], "no model call after a failed build"
    assert len(bodies) == 1, bodies
    text = bodies[0]
    assert (f"environment failure: the sandbox image {image} for the rust flavour") in text, text
    assert "exited with 7" in text and "cannot reach the Debian mirror" in text, text
    assert "autopatch: failed" in labels
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()
    assert not have_image(image)
