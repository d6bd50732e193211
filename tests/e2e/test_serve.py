"""`autopatch serve` as a process: durability across SIGKILL, clean SIGTERM, start-up errors,
a worker running the pipeline, /healthz, /metrics and the status page (admin listener) and
`autopatch jobs`. tests/e2e/test_listeners.py covers the two listeners and the flood limits."""
import concurrent.futures
import copy
import json
import os
import pathlib
import signal
import socket
import sqlite3
import subprocess
import time
import uuid

import pytest

from server_util import Server, clean_env, examples, jobs_json


def labeled(repo, number):
    p = copy.deepcopy([e for e in examples("issues") if e["action"] == "labeled"][0])
    p["installation"] = {"id": 31337}
    p["repository"]["full_name"] = repo
    p["issue"]["number"] = number
    return p


def pipeline_settings(tmp):
    """What the real pipeline needs to start (pipeline_new): an App key and a GitHub API URL.
    The URL is a closed port, so every job fails fast and honestly (GitHub unreachable)."""
    key = tmp / "app.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                   capture_output=True)
    return dict(APP_ID="1", PRIVATE_KEY_PATH=str(key), GITHUB_API_URL="http://127.0.0.1:9",
                AUTOPATCH_GH_RETRIES=0, AUTOPATCH_GH_DEADLINE_S=5,
                AUTOPATCH_DATA_DIR=str(tmp / "data"),
                AUTOPATCH_OWNER_ID="serve-e2e-" + uuid.uuid4().hex[:8])


def test_sigkill_after_n_2xx_answers_keeps_all_n_jobs(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    n = 300
    # Concurrent clients, so deliveries share group-commit batches.
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: s.post(labeled("e2e/kill", i + 1)), range(n)))
    # Kill at once: no shutdown path runs. Every 2xx must already be on disk.
    s.stop(signal.SIGKILL)
    accepted = {a[1]["job"] for a in answers if a[0] == 202}
    assert len(accepted) == n
    s2 = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    try:
        jobs = s2.jobs()
        assert {j["id"] for j in jobs} == accepted
        assert sorted(j["issue"] for j in jobs) == list(range(1, n + 1))
        assert all(j["state"] == "queued" for j in jobs)
    finally:
        s2.stop()


def mhd_threads(pid):
    """The names of the process's libmicrohttpd polling threads (one "MHD-single" per daemon
    without a pool, "MHD-worker" per thread of a pool)."""
    names = [(t / "comm").read_text().strip() for t in pathlib.Path(f"/proc/{pid}/task").iterdir()]
    return sorted(n for n in names if n.startswith("MHD-"))


@pytest.mark.parametrize("threads", ["3", None])
def test_http_threads_share_concurrent_deliveries(autopatch_bin, tmp_path, port, threads):
    """AUTOPATCH_HTTP_THREADS polling threads on the public listener (default: one per core,
    at most 4), the admin listener on one; concurrent clients on all of them still get one job
    per issue, and a redelivery of each is a duplicate."""
    want = int(threads) if threads else min(os.cpu_count() or 1, 4)
    settings = {"AUTOPATCH_HTTP_THREADS": threads} if threads else {}
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug", **settings).start()
    try:
        assert f"({want} HTTP thread(s))" in s.log_text()
        public = ["MHD-worker"] * want if want > 1 else ["MHD-single"]
        assert mhd_threads(s.proc.pid) == sorted(public + ["MHD-single"])  # + the admin one
        n = 150
        ids = [str(uuid.uuid4()) for _ in range(n)]
        work = [(i, ids[i]) for i in range(n)] + [(i, ids[i]) for i in range(0, n, 3)]
        with concurrent.futures.ThreadPoolExecutor(24) as pool:
            answers = list(pool.map(
                lambda w: s.post(labeled("e2e/threads", w[0] + 1), delivery=w[1]), work))
        statuses = sorted(a[0] for a in answers)
        # Each redelivery races its first delivery: whichever commits first makes the job.
        assert statuses == [200] * len(range(0, n, 3)) + [202] * n, statuses
        jobs = s.jobs()
        assert sorted(j["issue"] for j in jobs) == list(range(1, n + 1))
        assert len({j["id"] for j in jobs}) == n
    finally:
        s.stop()


def test_sigterm_exits_0_and_database_is_consistent(autopatch_bin, tmp_path, port):
    # Queue-only: the worker pool's shutdown (stop, grace period, re-queue) is covered by the
    # unit tests with a real pool; here the process and its database are the subject.
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: s.post(labeled("e2e/term", i + 1)), range(40)))
    assert all(a[0] == 202 for a in answers)
    assert s.stop(signal.SIGTERM) == 0
    assert '"stopped"' in s.log_text()
    db = sqlite3.connect(s.db)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM jobs WHERE state='queued'").fetchone() == (40,)
    assert db.execute("SELECT count(*) FROM deliveries").fetchone() == (40,)
    db.close()


def test_workers_never_fake_success(autopatch_bin, tmp_path, port):
    """With workers, a job runs through the pipeline. Until the pipeline issue lands, its
    placeholder fails every job with "pipeline not available" (issue 2); once it lands, it
    refuses to start without its GitHub settings (exit 2, one sentence). Either way no job may
    ever be reported as succeeded here."""
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug", AUTOPATCH_WORKERS=1,
               AUTOPATCH_DATA_DIR=tmp_path / "data")
    try:
        s.start()
    except AssertionError:
        assert s.proc.returncode == 2, s.log_text()
        assert len(s.log_text().strip().splitlines()) == 1, s.log_text()
        return
    try:
        status, body = s.post(labeled("e2e/work", 1))
        assert status == 202
        deadline = time.time() + 20
        job = None
        while time.time() < deadline:
            job = jobs_json(autopatch_bin, tmp_path, s.db, "--id", str(body["job"]))
            if job["state"] not in ("queued", "running"):
                break
            time.sleep(0.1)
        assert job["state"] == "failed", job
        assert job["error"] == "pipeline not available"
        assert job["result"] is None
        assert job["attempts"] == 1
        messages = [e["message"] for e in job["events"]]
        assert messages[0] == "queued"
        assert any(m.startswith("leased by") for m in messages)
    finally:
        s.stop()


def run_serve(binary, tmp, **env):
    return subprocess.run([binary, "serve"], cwd=tmp, env=clean_env(tmp, **env),
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("env,needle", [
    ({}, "WEBHOOK_SECRET is not set"),
    ({"WEBHOOK_SECRET": ""}, "WEBHOOK_SECRET is not set"),
    ({"WEBHOOK_SECRET": "x" * 12, "PORT": "eighty"}, "PORT"),
    ({"WEBHOOK_SECRET": "x" * 12, "PORT": "70000"}, "PORT"),
    ({"WEBHOOK_SECRET": "x" * 12, "AUTOPATCH_WORKERS": "-1"}, "AUTOPATCH_WORKERS"),
    ({"WEBHOOK_SECRET": "x" * 12, "AUTOPATCH_DB": "/nonexistent/dir/a.db"}, "AUTOPATCH_DB"),
    ({"WEBHOOK_SECRET": "x" * 12, "WEBHOOK_PATH": "hooks"}, "WEBHOOK_PATH"),
    ({"WEBHOOK_SECRET": "x" * 12, "AUTOPATCH_BIND": "localhost:80"}, "AUTOPATCH_BIND"),
    ({"WEBHOOK_SECRET": "x" * 12, "AUTOPATCH_HTTP_THREADS": "-1"}, "AUTOPATCH_HTTP_THREADS"),
    ({"WEBHOOK_SECRET": "x" * 12, "AUTOPATCH_HTTP_THREADS": "65"}, "AUTOPATCH_HTTP_THREADS"),
])
def test_startup_configuration_errors_exit_2(autopatch_bin, tmp_path, port, env, needle):
    env.setdefault("PORT", str(port))
    env.setdefault("AUTOPATCH_DB", str(tmp_path / "a.db"))
    env.setdefault("AUTOPATCH_WORKERS", "0")  # with workers, the pipeline also needs the App
    out = run_serve(autopatch_bin, tmp_path, AUTOPATCH_BIND=env.pop("AUTOPATCH_BIND", "127.0.0.1"),
                    **env)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


def test_port_in_use_exits_2(autopatch_bin, tmp_path, port):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        out = run_serve(autopatch_bin, tmp_path, WEBHOOK_SECRET="x" * 12, PORT=port,
                        AUTOPATCH_BIND="127.0.0.1", AUTOPATCH_DB=tmp_path / "a.db",
                        AUTOPATCH_WORKERS=0)
    assert out.returncode == 2 and "cannot listen" in out.stderr


def test_healthz_metrics_and_status_page(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    try:
        assert s.post(labeled("e2e/<b>page</b>", 3))[0] == 202
        assert s.post(b"{", event="issues")[0] == 400
        status, body = s.get("/healthz")
        health = json.loads(body)
        assert status == 200 and health["ok"] is True
        assert health["queue_depth"] == 1 and health["workers"] == 0
        status, body = s.admin_get("/metrics")
        text = body.decode()
        assert status == 200
        assert 'autopatch_webhook_deliveries_total{event="issues",outcome="queued"} 1' in text
        assert 'autopatch_webhook_deliveries_total{event="issues",outcome="bad_request"} 1' in text
        assert 'autopatch_jobs{state="queued"} 1' in text
        assert 'autopatch_http_request_duration_seconds_count 2' in text
        status, ctype, page = s.admin_request("GET", "/")
        assert status == 200 and ctype.startswith("text/html")
        assert b"e2e/&lt;b&gt;page&lt;/b&gt;" in page and b"<b>page" not in page
        assert s.admin_get("/nope")[0] == 404
        # none of it on the public listener
        assert s.get("/metrics")[0] == 404 and s.get("/")[0] == 404
        assert s.get("/nope")[0] == 404
    finally:
        s.stop()


def test_jobs_command_table_id_and_trajectory(autopatch_bin, tmp_path, port):
    s = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug").start()
    delivery = str(uuid.uuid4())
    status, body = s.post(labeled("e2e/jobs", 9), delivery=delivery)
    s.stop()
    env = clean_env(tmp_path, AUTOPATCH_DB=s.db)
    table = subprocess.run([autopatch_bin, "jobs"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, check=True).stdout
    header, row = table.splitlines()[:2]
    for col in ("ID", "DELIVERY", "REPOSITORY", "ISSUE", "TRIGGER", "STATE", "STAGE",
                "CREATED", "UPDATED", "RESULT/ERROR"):
        assert col in header
    assert delivery in row and "e2e/jobs" in row and "queued" in row
    one = subprocess.run([autopatch_bin, "jobs", "--id", str(body["job"])], cwd=tmp_path,
                         env=env, capture_output=True, text=True, check=True).stdout
    assert "events:" in one and "queued" in one
    # the agents code stores the trajectory path in job state; the command prints the file
    traj = tmp_path / "traj.jsonl"
    traj.write_text('{"role":"user","content":"hello"}\n')
    db = sqlite3.connect(s.db)
    db.execute("INSERT INTO job_state(job, key, value) VALUES(?, 'trajectory', ?)",
               (body["job"], str(traj)))
    db.commit()
    db.close()
    out = subprocess.run([autopatch_bin, "jobs", "--id", str(body["job"]), "--trajectory"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == traj.read_text()
    missing = subprocess.run([autopatch_bin, "jobs", "--id", "999"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "no job 999" in missing.stderr
    nodb = subprocess.run([autopatch_bin, "jobs"], cwd=tmp_path,
                          env=clean_env(tmp_path, AUTOPATCH_DB=tmp_path / "none.db"),
                          capture_output=True, text=True)
    assert nodb.returncode == 1 and "no database" in nodb.stderr
