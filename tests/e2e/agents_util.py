"""Helpers for the agents end-to-end tests: a git copy of examples/calc, scripted model
sessions built from standins/scripts/calc_happy.json, and running `autopatch fix` against
the scripted model server and the real Docker sandbox."""
import copy
import json
import os
import pathlib
import shutil
import subprocess
import time
import uuid

from model_stub import StubServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
CALC = ROOT / "examples" / "calc"
HAPPY = json.loads((ROOT / "standins" / "scripts" / "calc_happy.json").read_text())

READ_ONLY_TOOLS = {"list_files", "read_file", "search_code"}
WRITE_OR_RUN_TOOLS = {"write_file", "replace_in_file", "run", "finish"}
PROVIDERS = ["openai", "anthropic"]

REPRO_PATH = "tests/test_mean_empty.py"
REPRO_CMD = "python3 -m pytest -q tests/test_mean_empty.py"
ORIGINAL_LINE = "    return total(values) / len(values)\n"


def happy():
    """A deep copy of the recorded happy session."""
    return copy.deepcopy(HAPPY)


def brief():
    """The happy session without its look-around and its own test runs: the Planner answers at
    once, the Builder writes the reproduction test, fixes and finishes (the same test and fix,
    so the Tester proves it alike). For the tests whose subject is not the agents (the
    environment cache, setup): each job is several sandbox commands shorter."""
    s = happy()
    s["planner"] = [st for st in s["planner"] if not st.get("tool_calls")]
    s["builder"] = [st for st in s["builder"]
                    if not any(c["name"] == "run" for c in st.get("tool_calls", []))]
    return s


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def step(*calls, text=None, **extra):
    s = {"tool_calls": list(calls)}
    if text:
        s["text"] = text
    s.update(extra)
    return s


def write_repro(content=None):
    return call("write_file", path=REPRO_PATH, content=content or HAPPY["builder"][0]["tool_calls"][0]["arguments"]["content"])


def replace(old, new, path="calc.py"):
    return call("replace_in_file", path=path, old=old, new=new)


def finish(test_path=REPRO_PATH, test_command=REPRO_CMD, summary="fix mean([])"):
    return call("finish", test_path=test_path, test_command=test_command, summary=summary)


GOOD_FIX = replace(ORIGINAL_LINE, "    if not values:\n        return 0.0\n" + ORIGINAL_LINE)


def make_calc_repo(tmp_path, extra_files=None):
    """examples/calc (plus extra_files {path: text}) in a fresh git repository (one commit)."""
    repo = tmp_path / "calc"
    shutil.copytree(CALC, repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for path, text in (extra_files or {}).items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo)] + args, check=True, env=env)
    return repo


class FixRun:
    """One `autopatch fix` run against a scripted model."""

    def __init__(self, proc, requests, out_path, traj_path):
        self.proc = proc
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        self.requests = requests
        self.out_path = out_path
        self.traj_path = traj_path

    def by_role(self, role):
        return [r for r in self.requests if r["role"] == role]

    def __repr__(self):
        return "exit %s\nstdout:\n%s\nstderr:\n%s" % (self.code, self.out, self.err[-3000:])


def tool_names(request):
    """Names of the tools a recorded request offered, in either wire format."""
    names = []
    for t in request["body"].get("tools", []):
        names.append(t["function"]["name"] if "function" in t else t["name"])
    return names


def tool_results(request):
    """Texts of every tool result in a recorded request, in either wire format."""
    out = []
    for m in request["body"]["messages"]:
        if m.get("role") == "tool":
            out.append(m["content"])
        elif isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    out.append(b["content"] if isinstance(b["content"], str) else json.dumps(b["content"]))
    return out


def containers_of(owner):
    r = subprocess.run(["docker", "ps", "-aq", "--filter", "label=autopatch.owner=" + owner],
                       capture_output=True, text=True, check=True)
    return r.stdout.split()


def fix_env(tmp_path, stub, provider, owner, env=None):
    """The environment of one `autopatch fix` run (nothing inherited but PATH/DOCKER_HOST)."""
    e = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AUTOPATCH_OWNER_ID": owner,
        "AUTOPATCH_DATA_DIR": str(tmp_path / "data"),
        "AUTOPATCH_DB": str(tmp_path / "autopatch.db"),
        "AUTOPATCH_LLM_PROVIDER": provider,
        "AUTOPATCH_LLM_BASE_URL": stub.url + ("/v1" if provider == "openai" else ""),
        "AUTOPATCH_LLM_MODEL": "stub-model",
        "AUTOPATCH_LLM_TIMEOUT": "30",
    }
    if os.environ.get("DOCKER_HOST"):
        e["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
    e.update(env or {})
    return e


def new_owner():
    return "agents-e2e-" + uuid.uuid4().hex[:12]


def fix_argv(autopatch_bin, repo, out_path, traj_path, args=(), issue_file=None):
    return [str(autopatch_bin), "fix", "--repo", str(repo), "--issue-file",
            str(issue_file or CALC / "ISSUE.md"), "--out", str(out_path), "--trajectory",
            str(traj_path)] + list(args)


def run_fix_on(autopatch_bin, tmp_path, repo, script, provider="openai", env=None, args=(),
               timeout=300, issue_file=None):
    """Run `autopatch fix` on repo with the given script (and issue file, default calc's);
    returns FixRun (with .seconds). Asserts that no container of this run is left behind."""
    stub = StubServer(script).start()
    owner = new_owner()
    out_path = tmp_path / "patch.diff"
    traj_path = tmp_path / "trajectory.jsonl"
    e = fix_env(tmp_path, stub, provider, owner, env)
    cmd = fix_argv(autopatch_bin, repo, out_path, traj_path, args, issue_file)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=e, capture_output=True, text=True,
                              timeout=timeout)
        requests = stub.requests()
    finally:
        stub.stop()
    left = containers_of(owner)
    assert not left, "containers left behind: %s" % left
    r = FixRun(proc, requests, out_path, traj_path)
    r.seconds = time.monotonic() - start
    return r


def run_fix(autopatch_bin, tmp_path, script, provider, env=None, args=(), timeout=300,
            extra_files=None):
    """Run `autopatch fix` on a fresh calc repository with the given script; returns FixRun.
    Asserts that no container of this run is left behind."""
    return run_fix_on(autopatch_bin, tmp_path, make_calc_repo(tmp_path, extra_files), script,
                      provider, env, args, timeout)
