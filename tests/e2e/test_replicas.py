"""Scale-out end to end: two `autopatch serve` replicas share a real PostgreSQL queue behind a
real nginx (deploy/nginx/autopatch.conf), with one GitHub stand-in and the scripted model.

- a burst of deliveries (duplicates included) through nginx: every delivery stored once, one
  job per triggering delivery, one PR for the issue;
- `kill -9` of the replica running the Builder: the other rescues the job after the lease
  and finishes it;
- a replica frozen (SIGSTOP) past its lease, resumed (SIGCONT) after its job was leased again
  elsewhere, writes nothing to GitHub from then on (the stand-in's recorded requests);
- PostgreSQL restarted mid-burst: every delivery that got a 2xx has its row and its job.

The PostgreSQL server is started by the test (pg_util.PgServer); if it cannot start, the test
fails.
"""
import concurrent.futures
import signal
import time
import uuid

import pytest

from pipeline_util import REPO, happy_script
from replicas_util import Cluster, is_write, request_tokens

GHOST = "octo/ghost"  # not in the stand-in: its jobs fail fast at "repository not found"


@pytest.fixture
def cluster_factory(tmp_path, autopatch_bin):
    made = []

    def make(serve=True, **kw):
        c = Cluster(tmp_path / f"cluster{len(made)}", autopatch_bin, **kw)
        c.tmp.mkdir(parents=True)
        made.append(c)
        return c.start(serve=serve)

    yield make
    for c in made:
        c.stop()


def slow_builder_script(seconds):
    s = happy_script()
    s["builder"].insert(0, {"tool_calls": [{"name": "run",
                                             "arguments": {"command": f"sleep {seconds}"}}]})
    return s


def labeled(cluster, repo, issue):
    p = cluster.labeled_payload(issue)
    p["repository"]["full_name"] = repo
    p["repository"]["name"] = repo.split("/")[1]
    return p


def wait_builder(cluster, timeout=240):
    cluster.wait(lambda: any(r["role"] == "builder" for r in cluster.model.requests()), timeout,
                 "the Builder's first model request")


def test_burst_through_nginx_one_job_per_delivery_one_pr(cluster_factory):
    c = cluster_factory(replicas=2, workers=1)
    sends = []  # (delivery id, repo, issue, payload)
    calc_ids = [str(uuid.uuid4()) for _ in range(8)]
    ghost_ids = {i: str(uuid.uuid4()) for i in range(1, 13)}
    noise_ids = [str(uuid.uuid4()) for _ in range(10)]
    for d in calc_ids:
        sends += [("issues", labeled(c, REPO, 1), d)] * 2
    for issue, d in ghost_ids.items():
        sends += [("issues", labeled(c, GHOST, issue), d)] * 2
    opened = c.labeled_payload(1, action="opened")
    for d in noise_ids:
        sends += [("issues", opened, d)] * 2

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(lambda s: (s[2], c.post(*s)), sends))
    assert all(code in (200, 202) for _, code in codes), codes
    by_id = {}
    for d, code in codes:
        by_id.setdefault(d, []).append(code)
    # a job for the calc issue exactly once, whichever replica took which delivery
    assert sum(code == 202 for d in calc_ids for code in by_id[d]) == 1, by_id
    # every ghost delivery: one 202 and one duplicate
    for d in ghost_ids.values():
        assert sorted(by_id[d]) == [200, 202], (d, by_id[d])
    assert all(code == 200 for d in noise_ids for code in by_id[d])
    # each distinct delivery stored once
    distinct = len(calc_ids) + len(ghost_ids) + len(noise_ids)
    assert int(c.pg.psql("SELECT count(*) FROM deliveries")) == distinct
    assert int(c.pg.psql("SELECT count(DISTINCT delivery) FROM deliveries")) == distinct
    # one job per triggering delivery: the ghost ones by id, one for calc#1
    jobs = c.jobs()
    assert len(jobs) == 1 + len(ghost_ids), jobs
    assert {j["delivery"] for j in jobs if j["repo"] == GHOST} == set(ghost_ids.values())
    assert len([j for j in jobs if j["repo"] == REPO]) == 1
    # both replicas accepted deliveries (nginx spreads them)
    for r in c.replicas:
        assert "job queued" in r.log_text() or "duplicate" in r.log_text(), r.index
    # the calc job ends in one PR; every ghost job ends (failed: no such repository)
    c.wait(lambda: c.job_done(len(jobs)), 400, "every job to end")
    jobs = c.jobs()
    assert [j["state"] for j in jobs if j["repo"] == REPO] == ["succeeded"], jobs
    assert len(c.pulls()) == 1
    creates = [r for r in c.gh.requests()
               if r["method"] == "POST" and r["path"] == f"/repos/{REPO}/pulls"]
    assert len(creates) == 1
    # workers of both replicas took jobs
    owners = {o.split("/")[0] for j in jobs for o in c.leases(j["id"])}
    assert len(owners) == 2, owners


def test_kill_9_mid_builder_other_replica_finishes(cluster_factory):
    c = cluster_factory(replicas=2, workers=1, script=slow_builder_script(30))
    assert c.label() == 202
    wait_builder(c)
    c.wait(lambda: c.job_boxes(1), 60, "the job's sandbox")
    first = c.leases(1)[-1]
    victim = c.replica_of(first)
    victim.stop(signal.SIGKILL)
    # the survivor replays the session from the start
    c.model.script = type(c.model.script)(happy_script())
    c.wait(lambda: c.job_done(1), 300, "the other replica to finish the job")
    jobs = c.jobs()
    assert jobs[0]["state"] == "succeeded", jobs
    owners = c.leases(1)
    assert len(owners) >= 2 and c.replica_of(owners[-1]) is not victim, owners
    assert any("lease expired" in m for m in c.events(1))
    assert len(c.pulls()) == 1


def test_frozen_worker_resumed_after_release_publishes_nothing(cluster_factory):
    c = cluster_factory(replicas=2, workers=1, script=slow_builder_script(20), serve=False)
    a, b = c.replicas
    a.start()
    c.start_nginx()
    assert c.post_to(a, "issues", c.labeled_payload(1)) == 202
    wait_builder(c)
    c.wait(lambda: c.job_boxes(1), 60, "the job's sandbox")
    # wait for at least one progress comment write so the frozen run has one pending later
    time.sleep(1.0)
    a_tokens = {request_tokens(r) for r in c.gh.requests()} - {""}
    assert a_tokens, "replica a made no authenticated request"
    a.send(signal.SIGSTOP)
    t_stop = time.time()
    c.model.script = type(c.model.script)(happy_script())
    b.start()
    # b rescues the job once a's lease (3 s) expires, and leases it again (a new epoch)
    c.wait(lambda: len(c.leases(1)) >= 2, 60, "the job to be leased again")
    assert c.replica_of(c.leases(1)[-1]) is b
    wait_builder(c, 120)
    t_cont = time.time()
    a.send(signal.SIGCONT)
    c.wait(lambda: c.job_done(1), 300, "the new owner to finish")
    time.sleep(3)  # let the resumed replica run on: its sandbox command ends, it notices
    jobs = c.jobs()
    assert jobs[0]["state"] == "succeeded", jobs
    assert len(c.pulls()) == 1
    stale_writes = [r for r in c.gh.requests()
                    if is_write(r) and request_tokens(r) in a_tokens and r["time"] >= t_stop]
    assert stale_writes == [], stale_writes
    # ... because the resumed run was fenced, not because it never woke up
    assert a.alive()
    log = a.log_text()
    assert "no longer current" in log or "lease lost" in log, log[-3000:]
    assert t_cont > t_stop


def test_postgresql_restart_loses_no_accepted_delivery(cluster_factory):
    c = cluster_factory(replicas=2, workers=0)
    accepted, refused = {}, []
    stop_at = time.time() + 9
    restarted = []

    def sender(n):
        i = 0
        while time.time() < stop_at:
            d = f"pg-restart-{n}-{i}"
            issue = 1000 * (n + 1) + i
            code = c.post("issues", labeled(c, GHOST, issue), d)
            (accepted.__setitem__(d, code) if code in (200, 202) else refused.append((d, code)))
            i += 1
            time.sleep(0.02)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(sender, n) for n in range(3)]
        time.sleep(3)
        c.pg.restart("fast")
        restarted.append(time.time())
        for f in futs:
            f.result()
    assert restarted
    assert len(accepted) > 20, (len(accepted), refused[:5])
    stored = set(c.pg.psql("SELECT delivery FROM deliveries").split())
    with_job = set(c.pg.psql("SELECT delivery FROM jobs").split())
    lost = [d for d in accepted if d not in stored]
    assert lost == [], lost
    no_job = [d for d, code in accepted.items() if code == 202 and d not in with_job]
    assert no_job == [], no_job
    # after the restart both replicas accept again
    for r in c.replicas:
        assert c.post_to(r, "issues", labeled(c, GHOST, 99000 + r.index)) == 202
    # what was refused during the restart is accepted when GitHub redelivers it
    for d, _ in refused[:10]:
        n = int(d.rsplit("-", 2)[1])
        i = int(d.rsplit("-", 1)[1])
        assert c.post("issues", labeled(c, GHOST, 1000 * (n + 1) + i), d) in (200, 202)
