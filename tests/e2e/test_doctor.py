"""`autopatch doctor` against the GitHub stand-in, the real Docker engine and a model stand-in:
all green when everything is right; each broken setting gives its ✗ line with the sentence
that says how to fix it, and a non-zero exit."""
import subprocess
import uuid

import pytest

from github_util import GitHubStub, ModelStub, make_app_key, run_autopatch
from pg_util import PgServer
from ports import free_port

MODEL_KEY = "sk-doctor-test-key-123456"
IMAGE = "autopatch-sandbox:latest"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("doctor")
    key, pub = make_app_key(d)
    stub = GitHubStub(str(d / "gh"), app_key_pub=str(pub), app_id="4242").start()
    stub.seed_repo("octo/hello", files={"a.txt": "hi\n"})
    model = ModelStub(MODEL_KEY)
    yield {"dir": d, "key": key, "stub": stub, "model": model}
    stub.stop()
    model.stop()


def good_env(w):
    return {
        "APP_ID": "4242",
        "PRIVATE_KEY_PATH": str(w["key"]),
        "WEBHOOK_SECRET": "a-long-webhook-secret-for-tests",
        "GITHUB_API_URL": w["stub"].url,
        "AUTOPATCH_SANDBOX_IMAGE": IMAGE,
        "AUTOPATCH_LLM_PROVIDER": "openai",
        "AUTOPATCH_LLM_BASE_URL": w["model"].url,
        "AUTOPATCH_LLM_API_KEY": MODEL_KEY,
    }


def lines(out):
    return {l[2:].split(":")[0]: l for l in out.stdout.splitlines() if l[:1] in ("✓", "✗")}


NAMES = ["configuration", "private key", "JWT accepted", "installations visible", "database",
         "Docker reachable", "sandbox image present", "model endpoint reachable"]


def test_doctor_all_green(world, autopatch_bin, tmp_path):
    out = run_autopatch(autopatch_bin, ["doctor"], good_env(world), tmp_path)
    every = lines(out)
    got = {k: v for k, v in every.items() if not k.startswith("flavour ")}
    assert list(got) == NAMES, out.stdout + out.stderr
    assert all(l.startswith("✓") for l in got.values()), out.stdout
    # Every built flavour ran a box with its toolchain (python, the default, is always built).
    flavours = {k: v for k, v in every.items() if k.startswith("flavour ")}
    assert "flavour python" in flavours, out.stdout
    assert all(l.startswith("✓") for l in flavours.values()), out.stdout
    assert out.returncode == 0
    assert 'GitHub App "autopatch"' in got["JWT accepted"]
    assert "1 (octo)" in got["installations visible"]
    # No database yet: serve creates the default SQLite file in this folder; doctor does not.
    assert "does not exist yet" in got["database"], got["database"]
    assert not (tmp_path / "autopatch.db").exists()
    # The JWT really went to the stand-in and was verified there against the public key.
    assert any(r["path"] == "/app" and r["auth_scheme"] == "Bearer"
               for r in world["stub"].requests())



CASES = [
    # (id, change to the environment, the ✗ line, words of its sentence)
    ("no-app-id", {"APP_ID": None}, "configuration",
     ["APP_ID is not set", "Set APP_ID in .env to the App ID"]),
    ("no-webhook-secret", {"WEBHOOK_SECRET": None}, "configuration",
     ["WEBHOOK_SECRET is not set", "openssl rand -hex 32"]),
    ("missing-key-file", {"PRIVATE_KEY_PATH": "/nonexistent/app.pem"}, "private key",
     ["/nonexistent/app.pem cannot be read", "point it at the .pem file"]),
    ("garbage-key", {"PRIVATE_KEY_PATH": None, "PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----"
                     "\\nAAAA\\n-----END RSA PRIVATE KEY-----"}, "private key",
     ["not a PEM RSA private key", "download a new one"]),
    ("wrong-app-id", {"APP_ID": "999"}, "JWT accepted",
     ["A JSON web token could not be decoded", "Check that APP_ID is this App's ID"]),
    ("wrong-key", {"PRIVATE_KEY_PATH": "WRONG_KEY"}, "JWT accepted",
     ["A JSON web token could not be decoded", "PRIVATE_KEY_PATH is this App's current key"]),
    ("github-unreachable", {"GITHUB_API_URL": "CLOSED"}, "JWT accepted",
     ["Check GITHUB_API_URL and that this machine can reach it"]),
    ("no-installations", {"_installations": []}, "installations visible",
     ["installed nowhere", "Install it on the repositories"]),
    ("db-folder-unwritable", {"AUTOPATCH_DB": "/nonexistent/autopatch/autopatch.db"},
     "database", ["/nonexistent/autopatch is not writable", "Set AUTOPATCH_DB to a path"]),
    ("db-unreachable", {"AUTOPATCH_DB": "PG_CLOSED"}, "database",
     ["cannot connect to database postgresql://", "Start PostgreSQL or fix AUTOPATCH_DB"]),
    ("docker-down", {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}, "Docker reachable",
     ["Start dockerd (or point DOCKER_HOST at it)"]),
    ("no-image", {"AUTOPATCH_SANDBOX_IMAGE": "autopatch-no-such-image:never"},
     "sandbox image present", ["autopatch-no-such-image:never is not in Docker",
                               "deploy/sandbox-image/build.sh"]),
    ("setup-ca-missing", {"AUTOPATCH_SETUP_CA_FILE": "/nonexistent/corp-ca.pem"},
     "setup CA bundle", ["AUTOPATCH_SETUP_CA_FILE cannot be read", "/nonexistent/corp-ca.pem",
                         "fix the path or its permissions"]),
    ("setup-ca-not-pem", {"AUTOPATCH_SETUP_CA_FILE": "NOT_PEM"}, "setup CA bundle",
     ["holds no PEM certificate", "point it at the CA bundle in PEM form"]),
    ("model-key", {"AUTOPATCH_LLM_API_KEY": "sk-wrong-key-000000"}, "model endpoint reachable",
     ["refused the API key (HTTP 401)", "Set AUTOPATCH_LLM_API_KEY"]),
    ("model-down", {"AUTOPATCH_LLM_BASE_URL": "CLOSED"}, "model endpoint reachable",
     ["cannot reach", "Start the model server or fix AUTOPATCH_LLM_BASE_URL"]),
]

# A broken prerequisite also fails the checks that depend on it ("not checked. Fix ...").
DEPENDENTS = {"private key": ["JWT accepted", "installations visible"],
              "JWT accepted": ["installations visible"],
              "Docker reachable": ["sandbox image present"]}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_doctor_reports_each_broken_setting(world, autopatch_bin, tmp_path, case):
    _, change, name, words = case
    env = good_env(world)
    stub = world["stub"]
    for k, v in change.items():
        if k == "_installations":
            stub.config(installations=v)
        elif v is None:
            env.pop(k)
        elif v == "PG_CLOSED":
            env[k] = f"postgresql://autopatch:doctor-pw@127.0.0.1:{free_port()}/autopatch"
        elif v == "CLOSED":
            env[k] = f"http://127.0.0.1:{free_port()}" + ("/v1" if "LLM" in k else "")
        elif v == "NOT_PEM":
            (tmp_path / "ca.pem").write_text("not a certificate\n")
            env[k] = str(tmp_path / "ca.pem")
        elif v == "WRONG_KEY":
            other = tmp_path / "other"
            other.mkdir()
            env[k] = str(make_app_key(other)[0])
        else:
            env[k] = v
    try:
        out = run_autopatch(autopatch_bin, ["doctor"], env, tmp_path)
    finally:
        stub.config(installations=[1])
    got = lines(out)
    assert out.returncode == 1, out.stdout
    assert got[name].startswith("✗"), out.stdout
    for w in words:
        assert w in got[name], got[name]
    expected_bad = {name, *DEPENDENTS.get(name, [])}
    if name == "configuration" and "APP_ID" in change:
        expected_bad |= {"JWT accepted", "installations visible"}
    bad = {n for n, l in got.items() if l.startswith("✗")}
    assert bad == expected_bad, out.stdout
    assert "check" in out.stdout.splitlines()[-1] and "failed" in out.stdout.splitlines()[-1]


def test_doctor_database_postgresql(world, autopatch_bin, tmp_path):
    """A reachable PostgreSQL passes with its backend and schema version; the password in the
    URI is never printed, not even when the server refuses the connection."""
    pg = PgServer().start()
    try:
        env = good_env(world) | {"AUTOPATCH_DB": pg.uri}
        out = run_autopatch(autopatch_bin, ["doctor"], env, tmp_path)
        got = lines(out)
        assert got["database"].startswith("✓"), out.stdout
        version = pg.psql("SELECT max(version) FROM schema_migrations")
        assert f"postgresql, schema version {version}" in got["database"], got["database"]
        assert "shared by every replica" in got["database"], got["database"]
        wrong = pg.uri.replace("autopatch@", "autopatch:s3cret-doctor-pw@").replace(
            "/autopatch", "/no_such_db")
        out = run_autopatch(autopatch_bin, ["doctor"], env | {"AUTOPATCH_DB": wrong}, tmp_path)
        got = lines(out)
        assert got["database"].startswith("✗"), out.stdout
        assert "no_such_db" in got["database"], got["database"]
        assert "s3cret-doctor-pw" not in out.stdout + out.stderr, out.stdout + out.stderr
    finally:
        pg.cleanup()


def docker(*args):
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)


def test_doctor_checks_every_built_flavour(world, autopatch_bin, tmp_path):
    """Under a flavour repository of this test's own: node is the real node image (its
    toolchain is there), c is the python image (no cmake: a broken flavour), the rest are not
    built (listed with their build command, not failed)."""
    if docker("image", "inspect", "autopatch-sandbox:node").returncode != 0:
        pytest.fail("autopatch-sandbox:node is missing: deploy/sandbox-image/build.sh "
                    "--flavor node (scripts/test.sh builds it)")
    repo = "autopatch-test-doctor-" + uuid.uuid4().hex[:10]
    try:
        assert docker("tag", "autopatch-sandbox:node", f"{repo}:node").returncode == 0
        assert docker("tag", IMAGE, f"{repo}:c").returncode == 0
        env = dict(good_env(world), AUTOPATCH_FLAVOR_REPOSITORY=repo)
        out = run_autopatch(autopatch_bin, ["doctor"], env, tmp_path)
    finally:
        for f in ("node", "c"):
            docker("image", "rm", f"{repo}:{f}")
    got = lines(out)
    assert out.returncode == 1, out.stdout
    assert got["flavour python"].startswith("✓") and "(python3 python pip3 pytest)" in \
        got["flavour python"], out.stdout
    # Listed with the toolchain versions its labels give (build.sh reads them in the image).
    versions = docker("image", "inspect", "--format",
                      '{{index .Config.Labels "autopatch.toolchain"}}|'
                      '{{index .Config.Labels "autopatch.suite"}}',
                      "autopatch-sandbox:node").stdout.strip().split("|")
    assert versions[0].startswith("node "), ("rebuild the node flavour with labels", versions)
    assert got["flavour node"] == (f"✓ flavour node: {repo}:node (node npm): {versions[0]} "
                                   f"(Debian {versions[1]})"), out.stdout
    assert got["flavour c"].startswith("✗"), out.stdout
    assert (f"{repo}:c lacks `cmake`. Rebuild it: deploy/sandbox-image/build.sh --flavor c."
            in got["flavour c"]), out.stdout
    for f in ("go", "rust", "java"):
        assert (f"- flavour {f}: {repo}:{f} not built (built on first use, or now with "
                f"deploy/sandbox-image/build.sh --flavor {f})") in out.stdout.splitlines(), \
            out.stdout
        assert f"flavour {f}" not in got, out.stdout
    # Only the broken flavour failed.
    assert {n for n, l in got.items() if l.startswith("✗")} == {"flavour c"}, out.stdout


def test_doctor_says_when_console_org_entries_lack_members_read(world, autopatch_bin,
                                                                 tmp_path):
    """org:NAME entries of AUTOPATCH_CONSOLE_USERS need the organization permission Members
    (read), of the App (GET /app) and of its installation on NAME (GET /app/installations)."""
    stub = world["stub"]
    base = {"contents": "write", "issues": "write", "pull_requests": "write",
            "metadata": "read"}
    # (Docker pointed nowhere: its checks fail fast and are not what this test is about.)
    env = dict(good_env(world), AUTOPATCH_CONSOLE_USERS="alice, org:acme",
               DOCKER_HOST="unix:///nonexistent/docker.sock")
    acme = {"id": 7, "account": "acme", "target_type": "Organization"}

    def line(**config):
        stub.config(**config)
        out = run_autopatch(autopatch_bin, ["doctor"], env, tmp_path)
        got = lines(out)
        assert "console organizations" in got, out.stdout
        return got["console organizations"]

    try:
        text = line(app_permissions=base, installations=[1, acme])
        assert text.startswith("✗")
        assert "lacks the organization permission Members (read)" in text
        assert "set Members to Read-only" in text

        with_members = dict(base, members="read")
        text = line(app_permissions=with_members,
                    installations=[1, dict(acme, permissions=base)])
        assert text.startswith("✗")
        assert "installation on acme has not accepted" in text, text

        text = line(app_permissions=with_members, installations=[1])
        assert text.startswith("✗") and "not installed on acme" in text, text

        text = line(app_permissions=with_members,
                    installations=[1, dict(acme, permissions=with_members)])
        assert text.startswith("✓") and "Members (read) granted for org:acme" in text, text
    finally:
        stub.config(app_permissions=base, installations=[1])

    # Without org: entries the line is not there (nothing to check).
    out = run_autopatch(autopatch_bin, ["doctor"],
                        dict(env, AUTOPATCH_CONSOLE_USERS="alice"), tmp_path)
    assert "console organizations" not in lines(out)
    assert "JWT accepted" in lines(out)
