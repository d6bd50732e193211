"""End to end: GET /metrics after real jobs, parsed as the Prometheus text format, and the
Grafana dashboard (deploy/grafana/autopatch.json) checked against what /metrics exports.

One rig runs a job to a proven PR and a second job that a tiny repository budget refuses;
then every family must have HELP and TYPE, histograms must be cumulative with +Inf = _count,
and the new series must say what happened: one run succeeded and one failed, every stage
observed once, model calls and tokens equal to what the model stand-in answered, boxes
created and removed, one budget refusal.
"""
import json
import math
import re
import urllib.request

import pytest

from pipeline_util import ROOT, Rig, free_port

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_exposition(text):
    """{family: {"type", "help", "samples": [(name, {labels}, value)]}}; asserts the format."""
    families, current = {}, None
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            assert name not in families, f"family {name} twice"
            assert help_.strip(), f"{name}: empty HELP"
            families[name] = {"help": help_, "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert name == current, f"TYPE {name} without its HELP right before"
            assert typ in TYPES and families[name]["type"] is None, line
            families[name]["type"] = typ
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, labels, value = m[1], dict(LABEL.findall(m[3] or "")), float(m[4])
            fam = current
            assert fam and families[fam]["type"], f"{name} before its TYPE"
            if families[fam]["type"] == "histogram":
                assert name in (fam + "_bucket", fam + "_sum", fam + "_count"), (fam, name)
            else:
                assert name == fam, (fam, name)
            assert not math.isnan(value)
            families[fam]["samples"].append((name, labels, value))
    return families


def value(fams, name, **labels):
    fam = fams[re.sub(r"_(bucket|sum|count)$", "", name) if name not in fams else name]
    got = [v for n, l, v in fam["samples"] if n == name and all(l.get(k) == x
                                                                for k, x in labels.items())]
    assert len(got) == 1, (name, labels, got)
    return got[0]


def check_histograms(fams):
    for fam, f in fams.items():
        if f["type"] != "histogram":
            continue
        series = {}
        for name, labels, v in f["samples"]:
            key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
            series.setdefault(key, {"buckets": [], "sum": None, "count": None})
            if name.endswith("_bucket"):
                le = labels["le"]
                series[key]["buckets"].append((math.inf if le == "+Inf" else float(le), v))
            elif name.endswith("_sum"):
                series[key]["sum"] = v
            else:
                series[key]["count"] = v
        for key, s in series.items():
            les = [le for le, _ in s["buckets"]]
            assert les == sorted(les) and les[-1] == math.inf, (fam, key, les)
            counts = [c for _, c in s["buckets"]]
            assert counts == sorted(counts), f"{fam}{key}: buckets not cumulative: {counts}"
            assert s["count"] == counts[-1], (fam, key)
            assert s["sum"] is not None and s["sum"] >= 0, (fam, key)


@pytest.fixture(scope="module")
def metrics(tmp_path_factory, autopatch_bin):
    admin = free_port()
    rig = Rig(tmp_path_factory.mktemp("metrics"), autopatch_bin, issues=2, env={
        "AUTOPATCH_ADMIN_LISTEN": f"127.0.0.1:{admin}",
        "AUTOPATCH_PRICES": "scripted-calc=1/1",
        "AUTOPATCH_MAX_TOKENS": "200000",
        "AUTOPATCH_REPO_DAILY_BUDGET_USD": "0.2"})
    rig.start()
    try:
        assert rig.label(1) == 202
        rig.wait(lambda: rig.job_done(1), 300, "job 1")
        assert rig.label(2) == 202
        rig.wait(lambda: rig.job_done(2), 120, "job 2")
        # the second job's box, if any, and the pool's replacement settle
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain")
            text = r.read().decode()
        yield {"text": text, "fams": parse_exposition(text), "rig": rig,
               "requests": rig.model.requests(), "jobs": rig.jobs()}
    finally:
        rig.stop()


def test_metrics_exposition_is_well_formed(metrics):
    fams = metrics["fams"]
    check_histograms(fams)
    for fam, f in fams.items():
        if f["type"] == "counter":
            assert fam.endswith("_total"), fam
            assert all(v >= 0 for _, _, v in f["samples"]), fam


def test_metrics_describe_the_jobs_that_ran(metrics):
    fams, reqs = metrics["fams"], metrics["requests"]
    states = {j["id"]: j["state"] for j in metrics["jobs"]}
    assert states == {1: "succeeded", 2: "failed"}, states
    # queue depth by state
    assert value(fams, "autopatch_jobs", state="succeeded") == 1
    assert value(fams, "autopatch_jobs", state="failed") == 1
    assert value(fams, "autopatch_jobs", state="queued") == 0
    assert value(fams, "autopatch_jobs", state="running") == 0
    # one run each; the refused run took no time worth a bucket above 10 s
    assert value(fams, "autopatch_job_duration_seconds_count", outcome="succeeded") == 1
    assert value(fams, "autopatch_job_duration_seconds_count", outcome="failed") == 1
    assert value(fams, "autopatch_job_duration_seconds_bucket", outcome="failed", le="10") == 1
    ok_sum = value(fams, "autopatch_job_duration_seconds_sum", outcome="succeeded")
    stage_sum = 0
    for st in ("preparing", "planning", "building", "testing", "publishing"):
        n = value(fams, "autopatch_stage_duration_seconds_count", stage=st)
        assert n == 1, (st, n)  # the refused job never reached a stage
        stage_sum += value(fams, "autopatch_stage_duration_seconds_sum", stage=st)
    assert 0 < stage_sum <= ok_sum + 0.01
    # model calls and tokens: what the stand-in answered, nothing for the refused job
    assert value(fams, "autopatch_model_calls_total") == len(reqs) > 0
    assert value(fams, "autopatch_model_errors_total") == 0
    assert value(fams, "autopatch_model_calls_unreported_usage_total") == 0
    tin = sum(r["usage"]["in"] for r in reqs)
    tout = sum(r["usage"]["out"] for r in reqs)
    assert value(fams, "autopatch_model_tokens_total", direction="input") == tin
    assert value(fams, "autopatch_model_tokens_total", direction="output") == tout
    assert value(fams, "autopatch_model_cost_usd_total") == pytest.approx((tin + tout) / 1e6)
    # sandbox boxes: the job's box came and went (the warm pool keeps ready ones)
    created = value(fams, "autopatch_sandbox_boxes_created_total")
    removed = value(fams, "autopatch_sandbox_boxes_removed_total")
    active = value(fams, "autopatch_sandbox_boxes_active")
    assert created >= 2 and removed >= 1 and active == created - removed, \
        (created, removed, active)
    # the hook for the environment cache is exported (zero without a cache)
    assert value(fams, "autopatch_env_cache_requests_total", result="hit") >= 0
    # one refusal, by the repository's budget
    assert value(fams, "autopatch_budget_refusals_total", budget="repository") == 1
    assert value(fams, "autopatch_budget_refusals_total", budget="global") == 0


def dashboard_exprs():
    dash = json.loads((ROOT / "deploy" / "grafana" / "autopatch.json").read_text())
    assert dash["title"] and dash["uid"] and isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    exprs = []
    for p in dash["panels"]:
        assert p["type"] and p["title"] and set(p["gridPos"]) == {"x", "y", "w", "h"}, p
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        exprs += [(p["title"], t["expr"]) for t in p["targets"]]
    return exprs


def test_grafana_dashboard_uses_only_exported_metrics(metrics):
    exported = {n for f in metrics["fams"].values() for n, _, _ in f["samples"]}
    used = set()
    for title, expr in dashboard_exprs():
        assert expr.count("(") == expr.count(")"), (title, expr)
        names = set(re.findall(r"\bautopatch_[a-z0-9_]+", expr))
        assert names, (title, expr)
        missing = names - exported
        assert not missing, f"panel {title!r} names metrics /metrics does not export: {missing}"
        used |= names
    # every new family is on the dashboard
    for fam in ("autopatch_jobs", "autopatch_job_duration_seconds_bucket",
                "autopatch_stage_duration_seconds_bucket", "autopatch_model_calls_total",
                "autopatch_model_tokens_total", "autopatch_model_cost_usd_total",
                "autopatch_budget_refusals_total", "autopatch_sandbox_boxes_active",
                "autopatch_sandbox_boxes_created_total", "autopatch_env_cache_requests_total"):
        assert fam in used, fam
