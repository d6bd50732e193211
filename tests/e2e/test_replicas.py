"""Scale-out end to end: two `autopatch serve` replicas share a real PostgreSQL queue behind a
real nginx (deploy/nginx/autopatch.conf), with one GitHub stand-in and the scripted model.

- a burst of deliveries (duplicates included) through nginx: every delivery stored once, one
  job per triggering delivery, one PR for the issue;
- `kill -9` of the replica running the Builder: the other rescues the job after the lease
  and finishes it;
- SIGTERM of the replica running the Builder: it releases the lease as it stops, and the other
  takes the job at once (long before the lease could expire), the attempt not counted;
- a replica frozen (SIGSTOP) past its lease, resumed (SIGCONT) after its job was leased again
  elsewhere, writes nothing to GitHub from then on (the stand-in's recorded requests);
- PostgreSQL restarted mid-burst: every delivery that got a 2xx has its row and its job.

The PostgreSQL server is started by the test (pg_util.PgServer); if it cannot start, the test
fails. No test sleeps for a fixed time and hopes: each waits for the state it needs (the
queue, the stand-ins' recorded requests, the replicas' logs, /proc) with a generous deadline,
so the tests hold on a loaded 2-core machine.
"""
import concurrent.futures
import signal
import threading
import time
import uuid

import pytest

from model_stub import StubServer
from pipeline_util import REPO, happy_script
from replicas_util import Cluster, is_write, request_tokens

JOB_TIMEOUT = 600  # one calc job through the whole pipeline with real sandboxes, loaded

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


def builder_requests(model):
    return [r for r in model.requests() if r["role"] == "builder"]


def wait_builder(cluster, model=None, timeout=300):
    """Until the Builder made its first model request to model (the cluster's by default)."""
    model = model or cluster.model
    cluster.wait(lambda: builder_requests(model), timeout, "the Builder's first model request")


def writes_with(gh, tokens, since):
    """GitHub writes (REST or push) made with one of tokens at or after since."""
    return [r for r in gh.requests()
            if is_write(r) and request_tokens(r) in tokens and r["time"] >= since]


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
    assert all(code in (200, 202) for _, code in codes), \
        f"every delivery answered 200 or 202 through nginx: {codes}"
    by_id = {}
    for d, code in codes:
        by_id.setdefault(d, []).append(code)
    # a job for the calc issue exactly once, whichever replica took which delivery
    calc_codes = {d: by_id[d] for d in calc_ids}
    assert sum(code == 202 for codes_ in calc_codes.values() for code in codes_) == 1, \
        f"exactly one 202 (one job) for the 16 calc#1 deliveries, the rest 200: {calc_codes}"
    # every ghost delivery: one 202 and one duplicate
    for d in ghost_ids.values():
        assert sorted(by_id[d]) == [200, 202], \
            f"ghost delivery {d} sent twice: expected one 202 and one 200, got {by_id[d]}"
    assert all(code == 200 for d in noise_ids for code in by_id[d]), \
        f"'opened' deliveries start no job (200): {[by_id[d] for d in noise_ids]}"
    # each distinct delivery stored once
    distinct = len(calc_ids) + len(ghost_ids) + len(noise_ids)
    stored = int(c.pg.psql("SELECT count(*) FROM deliveries"))
    assert stored == distinct, f"{distinct} distinct deliveries stored once each: {stored} rows"
    stored = int(c.pg.psql("SELECT count(DISTINCT delivery) FROM deliveries"))
    assert stored == distinct, f"{distinct} distinct delivery ids stored: {stored}"
    # one job per triggering delivery: the ghost ones by id, one for calc#1
    jobs = c.jobs()
    assert len(jobs) == 1 + len(ghost_ids), f"{1 + len(ghost_ids)} jobs expected: {jobs}"
    assert {j["delivery"] for j in jobs if j["repo"] == GHOST} == set(ghost_ids.values()), \
        f"one job per ghost delivery: {jobs}"
    assert len([j for j in jobs if j["repo"] == REPO]) == 1, f"one job for calc#1: {jobs}"
    # both replicas accepted deliveries (nginx spreads them)
    for r in c.replicas:
        assert "job queued" in r.log_text() or "duplicate" in r.log_text(), \
            f"replica {r.index} accepted no delivery from nginx:\n{r.log_text()[-3000:]}"
    # the calc job ends in one PR; every ghost job ends (failed: no such repository)
    c.wait(lambda: c.job_done(len(jobs)), JOB_TIMEOUT, "every job to end")
    jobs = c.jobs()
    assert [j["state"] for j in jobs if j["repo"] == REPO] == ["succeeded"], \
        f"the calc#1 job succeeded: {jobs}"
    assert len(c.pulls()) == 1, f"one PR for calc#1: {c.pulls()}"
    creates = [r for r in c.gh.requests()
               if r["method"] == "POST" and r["path"] == f"/repos/{REPO}/pulls"]
    assert len(creates) == 1, f"one PR creation request: {creates}"
    # workers of both replicas took jobs
    owners = {o.split("/")[0] for j in jobs for o in c.leases(j["id"])}
    assert len(owners) == 2, f"workers of both replicas leased jobs: {owners}"


def test_kill_9_mid_builder_other_replica_finishes(cluster_factory):
    # The Builder's first command outlasts any wait below: the victim is inside it when killed.
    c = cluster_factory(replicas=2, workers=1, script=slow_builder_script(900))
    assert c.label() == 202
    wait_builder(c)
    c.wait(lambda: c.job_boxes(1), 180, "the job's sandbox")
    first = c.leases(1)[-1]
    victim = c.replica_of(first)
    assert [j["state"] for j in c.jobs()] == ["running"], \
        f"the job is running on replica {victim.index} before the kill: {c.jobs()}"
    assert len(builder_requests(c.model)) == 1, \
        "the victim is in the Builder's first (sleeping) command, not past it"
    victim.stop(signal.SIGKILL)
    assert not victim.alive(), f"replica {victim.index} survived SIGKILL"
    # the survivor replays the session from the start
    c.model.script = type(c.model.script)(happy_script())
    c.wait(lambda: c.job_done(1), JOB_TIMEOUT, "the other replica to finish the job")
    jobs = c.jobs()
    assert jobs[0]["state"] == "succeeded", f"the rescued job succeeded: {jobs}"
    owners = c.leases(1)
    assert len(owners) >= 2 and c.replica_of(owners[-1]) is not victim, \
        f"leased again by the survivor after the kill: {owners}"
    assert any("lease expired" in m for m in c.events(1)), \
        f"a 'lease expired' rescue event: {c.events(1)}"
    assert len(c.pulls()) == 1, f"one PR: {c.pulls()}"


def test_sigterm_hands_the_running_job_to_the_other_replica_at_once(cluster_factory):
    lease = 300  # a takeover within this cannot be the rescue of an expired lease
    c = cluster_factory(replicas=2, workers=1, script=slow_builder_script(900),
                        lease_seconds=lease)
    assert c.label() == 202
    wait_builder(c)
    c.wait(lambda: c.job_boxes(1), 180, "the job's sandbox")
    victim = c.replica_of(c.leases(1)[-1])
    c.model.script = type(c.model.script)(happy_script())
    t_term = time.time()
    victim.stop(signal.SIGTERM)
    assert victim.proc.returncode == 0, \
        f"replica {victim.index} exits 0 on SIGTERM:\n{victim.log_text()[-3000:]}"
    c.wait(lambda: len(c.leases(1)) >= 2, lease / 2, "the other replica to lease the "
           "released job (well before the lease could have expired)")
    assert time.time() - t_term < lease, "taken over before the lease expired"
    events = c.events(1)
    assert any(m.startswith("re-queued (shutdown)") for m in events), \
        f"the stopping replica released the job: {events}"
    assert not any("lease expired" in m for m in events), \
        f"a release, not a rescue of an expired lease: {events}"
    owners = c.leases(1)
    assert c.replica_of(owners[-1]) is not victim, f"leased again by the other: {owners}"
    leased = [m for m in events if m.startswith("leased by ")]
    assert leased[-1].endswith("(attempt 1)"), \
        f"the interrupted attempt is not counted: {leased}"
    c.wait(lambda: c.job_done(1), JOB_TIMEOUT, "the other replica to finish the job")
    jobs = c.jobs()
    assert jobs[0]["state"] == "succeeded", f"the handed-over job succeeded: {jobs}"
    assert len(c.pulls()) == 1, f"one PR: {c.pulls()}"


def test_frozen_worker_resumed_after_release_publishes_nothing(cluster_factory):
    # Each GitHub write waits 2 s for its pacing slot after its fence check, so the freeze
    # likely lands between a write's check and its request: the resumed run must not send it
    # (the REST client's write guard asks the fence again as the request goes out).
    c = cluster_factory(replicas=2, workers=1, script=slow_builder_script(20), serve=False,
                        env={"AUTOPATCH_GH_WRITE_SPACING_MS": "2000"})
    a, b = c.replicas
    # b has its own model stand-in: what the resumed a asks the model cannot take b's turns.
    b.model = StubServer(happy_script()).start()
    # The slow pacing is for a's writes (the freeze's window); b, which only finishes the
    # job, waits for nothing but the slot a reserved last.
    b.extra_env["AUTOPATCH_GH_WRITE_SPACING_MS"] = "0"
    a.start()
    c.start_nginx()
    assert c.post_to(a, "issues", c.labeled_payload(1)) == 202
    wait_builder(c)
    c.wait(lambda: c.job_boxes(1), 180, "the job's sandbox")
    # a has written to GitHub (the progress comment), so its run has more writes pending
    c.wait(lambda: [r for r in c.gh.requests() if is_write(r) and request_tokens(r)], 120,
           "replica a's first authenticated write to GitHub")
    t_stop = a.freeze()
    # every credential seen so far is a's: b has not started
    a_tokens = {request_tokens(r) for r in c.gh.requests()} - {""}
    assert a_tokens, "replica a made no authenticated request"
    b.start()
    # b rescues the job once a's lease expires, and leases it again (a new epoch)
    c.wait(lambda: len(c.leases(1)) >= 2, 180, "the job to be leased again by b")
    first, second = c.leases(1)[:2]
    assert c.replica_of(first) is a and c.replica_of(second) is b, \
        f"leased by a, then by b: {c.leases(1)}"
    assert a.proc_state() == "T", f"a is still frozen when b leases the job ({a.proc_state()})"
    wait_builder(c, b.model)
    t_cont = time.time()
    a.send(signal.SIGCONT)
    c.wait(lambda: c.job_done(1), JOB_TIMEOUT, "the new owner to finish")
    # the resumed run notices, stops and ends without recording an outcome
    c.wait(lambda: "this run's outcome is not recorded" in a.log_text(), 300,
           "the resumed run on a to end as a lost lease")
    jobs = c.jobs()
    assert jobs[0]["state"] == "succeeded", f"b's run succeeded: {jobs}"
    assert len(c.pulls()) == 1, f"one PR: {c.pulls()}"
    assert [c.replica_of(o) for o in c.leases(1)] == [a, b], \
        f"leased exactly twice, by a then b (a third lease means b lost its own): {c.leases(1)}"
    stale = writes_with(c.gh, a_tokens, t_cont)
    assert stale == [], f"the resumed replica a wrote to GitHub after SIGCONT: {stale}"
    # ... because the resumed run was fenced, not because it never woke up
    assert a.alive(), "replica a died instead of being fenced"
    log = a.log_text()
    assert "no longer current" in log or "lease lost" in log, \
        f"replica a's log names the lost lease:\n{log[-3000:]}"
    assert t_cont > t_stop


def test_postgresql_restart_loses_no_accepted_delivery(cluster_factory):
    c = cluster_factory(replicas=2, workers=0)
    accepted, refused = {}, []  # delivery id -> (code, time answered); (id, code)
    stop = threading.Event()

    def sender(n):
        i = 0
        while not stop.is_set():
            d = f"pg-restart-{n}-{i}"
            issue = 1000 * (n + 1) + i
            code = c.post("issues", labeled(c, GHOST, issue), d)
            if code in (200, 202):
                accepted[d] = (code, time.time())
            else:
                refused.append((d, code))
            i += 1
            time.sleep(0.02)

    def accepted_since(t):
        return sum(1 for _, at in list(accepted.values()) if at > t)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(sender, n) for n in range(3)]
        try:
            c.wait(lambda: accepted_since(0) >= 20, 180, "20 deliveries accepted before the "
                   "restart")
            t_restart = time.time()
            c.pg.restart("fast")
            t_up = time.time()
            # the senders go on through the restart until the replicas accept again
            c.wait(lambda: accepted_since(t_up) >= 20, 180, "20 deliveries accepted after the "
                   "restart")
        finally:
            stop.set()
            for f in futs:
                f.result()
    stored = set(c.pg.psql("SELECT delivery FROM deliveries").split())
    with_job = set(c.pg.psql("SELECT delivery FROM jobs").split())
    lost = [d for d in accepted if d not in stored]
    assert lost == [], f"deliveries answered 2xx but not stored: {lost}"
    no_job = [d for d, (code, _) in accepted.items() if code == 202 and d not in with_job]
    assert no_job == [], f"deliveries answered 202 but without a job: {no_job}"
    assert all(code >= 500 for _, code in refused), \
        f"a delivery refused while PostgreSQL restarted gets a 5xx (GitHub redelivers): {refused}"
    # after the restart both replicas accept again, straight (a 503 until it reconnects is
    # allowed: nothing was stored, and the redelivery is then the job's first)
    for r in c.replicas:
        d, codes = f"after-restart-{r.index}", []
        deadline = time.time() + 60
        while time.time() < deadline:
            codes.append(c.post_to(r, "issues", labeled(c, GHOST, 99000 + r.index), d))
            if codes[-1] != 503:
                break
            time.sleep(0.5)
        assert codes[-1] == 202, f"replica {r.index} accepts after the restart: {codes}"
    # what was refused during the restart is accepted when GitHub redelivers it
    for d, _ in refused[:10]:
        n = int(d.rsplit("-", 2)[1])
        i = int(d.rsplit("-", 1)[1])
        code = c.post("issues", labeled(c, GHOST, 1000 * (n + 1) + i), d)
        assert code in (200, 202), f"redelivery of refused {d} accepted: {code}"
    assert t_up >= t_restart
