"""What a real API server and kubelet do that the backend must not rely on being otherwise
(issue 30), with the stand-in behaving like them: a pod deleted with grace 0 is gone from the
API at once while its containers linger, so the deny-all policy may go only once a gracefully
deleted pod's object is gone; fieldValidation=Strict on every write (an unknown field is a
Warning header under the server's default, which the tests treat as a failure); the exec
upgrade's Host carries the port and no Origin; a refused upgrade reads the server's Status."""
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import k8s_util
from sandbox_util import IMAGE, Sandbox

NS = k8s_util.NAMESPACE
PODS = f"/api/v1/namespaces/{NS}/pods"
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"


def _post(stub, path, body):
    """POST with the token: (status, answer, the Warning headers)."""
    ctx = ssl.create_default_context(cafile=str(stub.dir / "ca.crt"))
    req = urllib.request.Request(stub.server + path, method="POST",
                                 data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {stub.token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=60) as r:
            return r.status, json.loads(r.read()), r.headers.get_all("Warning") or []
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers.get_all("Warning") or []


def _box_objects(name, owner="manual"):
    labels = {"autopatch.owner": owner, "autopatch.box": name, "autopatch.job": "t"}
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": name, "labels": labels},
              "spec": {"podSelector": {"matchLabels": {"autopatch.box": name}},
                       "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}}
    sc = {"allowPrivilegeEscalation": False, "privileged": False,
          "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 10001,
          "runAsGroup": 10001, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}
    lim = {"cpu": "100m", "memory": str(64 << 20), "ephemeral-storage": str(16 << 20)}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "enableServiceLinks": False, "activeDeadlineSeconds": 300,
                    "terminationGracePeriodSeconds": 1,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "box", "image": IMAGE,
                                    "command": ["sh", "-c", "trap 'exit 0' TERM; "
                                                "while :; do sleep 3600 & wait; done"],
                                    "securityContext": sc,
                                    "resources": {"limits": lim, "requests": lim}}]}}
    return policy, pod


def _wait_running(stub, name):
    for _ in range(300):
        code, body = stub.api("GET", f"{PODS}/{name}")
        if code == 200 and body["status"]["phase"] == "Running":
            return
        time.sleep(0.1)
    raise AssertionError(f"pod {name} did not start")


def test_no_moment_without_the_deny_all_policy(tmp_path, autopatch_bin):
    """The kubelet of the stand-in stops containers 1.5 s after the API deleted the pod. A
    force delete followed by the policy's delete is caught (the detector works); autopatch's
    boxes, made and removed and reaped, leave no such moment."""
    stub = k8s_util.K8sStub(tmp_path / "s", extra=("--kubelet-delay-ms", "1500"))
    try:
        # The detector: grace 0 removes the object at once, the container lingers.
        policy, pod = _box_objects("manual-force")
        assert _post(stub, POLICIES + "?fieldValidation=Strict", policy)[0] == 201
        assert _post(stub, PODS + "?fieldValidation=Strict", pod)[0] == 201
        _wait_running(stub, "manual-force")
        code, body = stub.api("DELETE", f"{PODS}/manual-force?gracePeriodSeconds=0")
        assert code == 200
        assert stub.api("GET", f"{PODS}/manual-force")[0] == 404  # gone from the API at once
        assert stub.api("DELETE", f"{POLICIES}/manual-force")[0] == 200
        overlaps = stub.report()["overlaps"]
        assert [o["pod"] for o in overlaps] == ["manual-force"], overlaps
        assert overlaps[0]["objectGone"] is True
        # A graceful delete keeps the object, marked, until the container is gone.
        policy, pod = _box_objects("manual-grace")
        assert _post(stub, POLICIES + "?fieldValidation=Strict", policy)[0] == 201
        assert _post(stub, PODS + "?fieldValidation=Strict", pod)[0] == 201
        _wait_running(stub, "manual-grace")
        assert stub.api("DELETE", f"{PODS}/manual-grace")[0] == 200
        code, body = stub.api("GET", f"{PODS}/manual-grace")
        assert code == 200 and body["metadata"]["deletionTimestamp"], body
        assert body["metadata"]["deletionGracePeriodSeconds"] == 1
        t0 = time.monotonic()
        while stub.api("GET", f"{PODS}/manual-grace")[0] == 200:
            assert time.monotonic() - t0 < 30
            time.sleep(0.05)
        assert time.monotonic() - t0 > 1.0  # the kubelet's delay: the object waited for it
        assert not k8s_util.stub_containers("manual-grace")
        assert stub.api("DELETE", f"{POLICIES}/manual-grace")[0] == 200
        assert len(stub.report()["overlaps"]) == 1

        # autopatch: a box run to its end, a box killed by its timeout, a reap of a box whose
        # creator went away.
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub)
        r = sb.run("sh", "-c", "echo ran", text=True)
        assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
        r = sb.run("sleep", "30", timeout=2, text=True)
        assert r.returncode == 124, r.stderr
        proc = sb.popen("sleep", "60", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if any(x.startswith("pod/") for x in stub.owned_objects(sb.owner)):
                break
            time.sleep(0.1)
        time.sleep(1)
        proc.kill()  # no clean-up by the creator: the reaper's job
        proc.wait()
        r = sb.reap()
        assert r.returncode == 0, r.stderr
        assert sb.leftovers() == []
        rep = stub.report()
        assert len(rep["overlaps"]) == 1, rep["overlaps"]  # only the manual force delete
        assert rep["unvalidated"] == [] and rep["warnings"] == [], rep
    finally:
        # The manual force delete above is an overlap by design.
        stub.close(check=False)


def test_a_pod_still_terminating_keeps_its_policy_until_a_later_reap(tmp_path, autopatch_bin):
    """A kubelet slower than the wait: the box's removal gives up with a log line and keeps the
    deny-all policy (the command still succeeds); a reap while the pod is there keeps it too."""
    stub = k8s_util.K8sStub(tmp_path / "s", extra=("--kubelet-delay-ms", "60000"))
    try:
        # A shorter wait than the default 30 s, and the setting is honoured.
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub,
                     extra_env={"AUTOPATCH_K8S_REMOVE_SECONDS": "3"})
        t0 = time.monotonic()
        r = sb.run("true", text=True, wall=180)
        assert r.returncode == 0, r.stderr
        assert "is still terminating after 3 s (AUTOPATCH_K8S_REMOVE_SECONDS); its deny-all " \
            "NetworkPolicy stays until the reaper finds the pod gone" in r.stderr, r.stderr
        assert time.monotonic() - t0 < 25
        left = stub.owned_objects(sb.owner)
        assert sorted(x.split("/")[0] for x in left) == ["networkpolicy", "pod"], left
        r = sb.reap("--all")
        assert "still terminating; its NetworkPolicy stays until a later reap" in r.stderr, \
            r.stderr
        assert any(x.startswith("networkpolicy/") for x in stub.owned_objects(sb.owner))
        assert stub.report()["overlaps"] == []
    finally:
        stub.close(check=False)


def test_unknown_fields_warn_by_default_and_autopatch_writes_strictly(tmp_path, autopatch_bin):
    """As a real server: without fieldValidation a misspelt field is dropped with a Warning
    header (which the stand-in reports and close() fails on); Strict refuses it. autopatch's
    every write is strict, and its objects carry no field the API does not know."""
    stub = k8s_util.K8sStub(tmp_path / "s")
    try:
        policy, pod = _box_objects("typo")
        pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesytem"] = True
        code, body, _ = _post(stub, PODS + "?fieldValidation=Strict", pod)
        assert code == 400 and body["reason"] == "BadRequest", body
        assert 'strict decoding error: unknown field ' \
            '"spec.containers[0].securityContext.readOnlyRootFilesytem"' in body["message"]
        assert stub.report()["warnings"] == []
        assert _post(stub, POLICIES, policy)[0] == 201
        code, body, warnings = _post(stub, PODS, pod)  # the server's default: Warn
        assert code == 201, body
        assert warnings == ['299 - "unknown field '
                            '\\"spec.containers[0].securityContext.readOnlyRootFilesytem\\""'], \
            warnings
        assert "readOnlyRootFilesytem" not in json.dumps(body)  # dropped, as a server does
        assert len(stub.report()["warnings"]) == 1
        try:
            stub.assert_clean()
            raise AssertionError("assert_clean() let a Warning header pass")
        except AssertionError as e:
            assert "Warning headers" in str(e), e
        stub.delete_owned("manual")
    finally:
        stub.close(check=False)

    stub = k8s_util.K8sStub(tmp_path / "s2")
    try:
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub)
        r = sb.run("sh", "-c", "echo strict", text=True)
        assert r.returncode == 0 and r.stdout == "strict\n", r.stderr
        assert "warns" not in r.stderr, r.stderr
        assert sb.leftovers() == []
    finally:
        stub.close()  # fails on a Warning header or a write without Strict


def test_exec_upgrade_headers_and_a_refusal_with_400(tmp_path, autopatch_bin):
    """The upgrade carries Host with the port and no Origin (lws's default Origin is
    http://host over TLS). An exec the cluster refuses with 400 reads as the server's own
    Status message, as 401/403/404 do."""
    stub = k8s_util.K8sStub(tmp_path / "s")
    try:
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub)
        r = sb.run("sh", "-c", "echo up", text=True)
        assert r.returncode == 0 and r.stdout == "up\n", r.stderr
        ups = stub.report()["upgrades"]
        assert ups, "no exec upgrade was recorded"
        for u in ups:
            assert u == {"method": "GET", "host": f"127.0.0.1:{stub.port}", "origin": None}, u
    finally:
        stub.close()
    stub = k8s_util.K8sStub(tmp_path / "s2", extra=("--deny-exec", "exec into boxes is off here"))
    try:
        (tmp_path / "b").mkdir()
        sb = Sandbox(autopatch_bin, tmp_path / "b", backend="kubernetes", stub=stub)
        r = sb.run("true", text=True)
        assert r.returncode == 125
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "400" in lines[0] and 'admission webhook "exec-guard" denied the request: ' \
            "exec into boxes is off here" in lines[0], lines[0]
        assert sb.leftovers() == []
    finally:
        stub.close()


@pytest.mark.parametrize("backend", ["docker", "kubernetes"])
def test_a_box_that_fills_its_tmpfs_is_not_oom_killed(tmp_path, autopatch_bin, backend):
    """Files in a tmpfs count against the memory limit: with the sizes left to their shares
    of the memory (/tmp 1/8, workspace 1/4, trees 1/2) a box that fills every one of them
    gets ENOSPC, not the OOM killer (before, a 256m box had a 256m /tmp, a 1g workspace and
    2g of trees, and was killed filling the first)."""
    stub = k8s_util.K8sStub(tmp_path / "s") if backend == "kubernetes" else None
    try:
        sb = Sandbox(autopatch_bin, tmp_path, backend=backend, stub=stub,
                     extra_env={"AUTOPATCH_SANDBOX_MEMORY": "256m"})
        script = ("for d in /tmp /tmp/workspace /tmp/trees; do "
                  "head -c 1000000000 /dev/zero > $d/fill 2>/dev/null; "
                  "echo $d $(wc -c < $d/fill) $(df -k $d | awk 'NR==2 {print $2}'); done; "
                  "echo survived")
        r = sb.run("sh", "-c", script, text=True, timeout=120, wall=240)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        lines = r.stdout.splitlines()
        assert lines[-1] == "survived", r.stdout
        sizes = {"/tmp": 32 << 20, "/tmp/workspace": 64 << 20, "/tmp/trees": 128 << 20}
        for line in lines[:-1]:
            d, written, total_kib = line.split()
            assert int(total_kib) * 1024 == sizes[d], line  # the tmpfs has its share's size
            assert int(written) >= sizes[d] - (1 << 20), line  # ... and was filled to it
        assert sb.leftovers() == []
    finally:
        if stub:
            stub.close()
