"""The Kubernetes API stand-in checked with the official JavaScript client
(@kubernetes/client-node, standins/k8s_stub/selftest.mjs): pods, exec over v5 (stdin
half-closed with the close channel) and v4, exit codes from the Status object, the API's error
codes; then what only autopatch's backend exercises: the Role of deploy/kubernetes/rbac.yaml
enforced (a missing verb is a one-line 403 naming verb and resource), the in-cluster
configuration, client certificates, and a box whose pod the stand-in runs hardened."""
import json
import pathlib
import subprocess
import time

import pytest

import k8s_util
from sandbox_util import IMAGE, Sandbox

ROOT = pathlib.Path(__file__).resolve().parents[2]


def selftest(stub, tmp_path, proto):
    kc = stub.kubeconfig(tmp_path / "kc", auth="token")
    r = subprocess.run(["node", str(k8s_util.STUB / "selftest.mjs"), str(kc), k8s_util.NAMESPACE,
                        IMAGE, proto], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("protocols", [None, ["v4.channel.k8s.io"]])
def test_official_client_against_the_stand_in(tmp_path, protocols):
    stub = k8s_util.K8sStub(tmp_path, protocols=protocols)
    try:
        want = (protocols or ["v5.channel.k8s.io"])[0]
        out = selftest(stub, tmp_path, want)
    finally:
        stub.close()
    assert "error" not in out, out
    assert out["create"] == "Pending" and out["phase"] == "Running"
    assert out["protocol"] == want
    assert out["ok"]["stdout"] == "10001\n" and out["ok"]["stderr"] == "to-err\n"
    assert out["ok"]["status"]["status"] == "Success"
    fail = out["fail"]["status"]
    assert fail["status"] == "Failure" and fail["reason"] == "NonZeroExitCode"
    assert fail["details"]["causes"][0] == {"reason": "ExitCode", "message": "3"}
    if want.startswith("v5"):
        assert out["stdin"]["stdout"] == "12\ndone\n"  # the close channel gave cat its EOF
    assert out["duplicate"] == {"code": 409, "reason": "AlreadyExists"}
    assert out["invalid"] == {"code": 422, "reason": "Invalid"}
    assert out["privileged"] == {"code": 403, "reason": "Forbidden"}
    assert out["missing"] == {"code": 404, "reason": "NotFound"}
    assert out["other_ns"] == {"code": 404, "reason": "NotFound"}
    assert out["policy_create"] is True and out["policy_list"] == 1
    assert out["listed"] == 1 and out["deleted"] is True


def _run(sb, *cmd, **kw):
    return sb.run(*cmd, text=True, **kw)


def test_missing_permission_is_one_line_naming_verb_and_resource(tmp_path, autopatch_bin):
    role = tmp_path / "role.yaml"
    text = (ROOT / "deploy/kubernetes/rbac.yaml").read_text()
    # The Role without "create" on pods.
    role.write_text(text.replace('verbs: ["create", "get", "list", "delete"]',
                                 'verbs: ["get", "list", "delete"]'))
    stub = k8s_util.K8sStub(tmp_path / "s", role=role)
    try:
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub)
        r = _run(sb, "true")
        assert r.returncode == 125
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert f"cannot create pods in namespace {k8s_util.NAMESPACE}" in lines[0]
        assert 'cannot create resource "pods"' in lines[0]  # the API's own message follows
        assert sb.leftovers() == []  # the policy made before the pod was removed again
    finally:
        stub.close()


def test_in_cluster_configuration_and_client_certificates(tmp_path, autopatch_bin):
    stub = k8s_util.K8sStub(tmp_path / "s")
    try:
        # In-cluster: KUBERNETES_SERVICE_HOST/_PORT and a service-account dir.
        sa = tmp_path / "sa"
        sa.mkdir()
        (sa / "token").write_text(stub.token + "\n")
        (sa / "ca.crt").write_bytes((stub.dir / "ca.crt").read_bytes())
        (tmp_path / "a").mkdir()
        sb = Sandbox(autopatch_bin, tmp_path / "a", backend="kubernetes", stub=stub)
        sb.env.pop("KUBECONFIG")
        sb.env.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                       "KUBERNETES_SERVICE_PORT": str(stub.port),
                       "AUTOPATCH_K8S_SERVICEACCOUNT_DIR": str(sa)})
        r = _run(sb, "sh", "-c", "echo in-cluster; cat /proc/self/status | grep -c Seccomp")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("in-cluster\n")
        # A wrong token: 401 named as such, one line.
        (sa / "token").write_text("wrong\n")
        r = _run(sb, "true")
        assert r.returncode == 125 and "401" in r.stderr and len(r.stderr.splitlines()) == 1
        # A kubeconfig with an inline client certificate (no token).
        (tmp_path / "b").mkdir()
        sb = Sandbox(autopatch_bin, tmp_path / "b", backend="kubernetes", stub=stub)
        stub.kubeconfig(sb.env["KUBECONFIG"], auth="cert", inline=True)
        r = _run(sb, "sh", "-c", "echo by-cert")
        assert r.returncode == 0 and r.stdout == "by-cert\n", r.stderr
        assert sb.leftovers() == []
    finally:
        stub.close()


def test_the_pod_is_hardened_as_the_docker_box_is(tmp_path, autopatch_bin):
    """What the stand-in received for a box: every Docker hardening rule, mapped."""
    stub = k8s_util.K8sStub(tmp_path / "s")
    try:
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub, extra_env={
            "AUTOPATCH_SANDBOX_MEMORY": "256m", "AUTOPATCH_SANDBOX_CPUS": "0.5",
            "AUTOPATCH_K8S_EPHEMERAL_STORAGE": "64m", "AUTOPATCH_SANDBOX_TMP_SIZE": "16m",
            "AUTOPATCH_SANDBOX_WORKSPACE_SIZE": "32m", "AUTOPATCH_SANDBOX_TREES_SIZE": "48m"})
        proc = sb.popen("sleep", "30", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        pods = []
        for _ in range(300):
            code, body = stub.api("GET", f"/api/v1/namespaces/{k8s_util.NAMESPACE}/pods"
                                  f"?labelSelector=autopatch.owner%3D{sb.owner}")
            pods = body["items"]
            if pods and pods[0]["status"]["phase"] == "Running":
                break
            time.sleep(0.1)
        proc.terminate()
        proc.wait(timeout=30)
        assert len(pods) == 1
        spec = pods[0]["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        assert not spec["hostNetwork"] and not spec["hostPID"] and not spec["hostIPC"]
        assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] > 0
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert {v["name"]: v["emptyDir"]["medium"] for v in spec["volumes"]} == \
            {"tmp": "Memory", "workspace": "Memory", "trees": "Memory", "repo": "Memory"}
        assert all("sizeLimit" in v["emptyDir"] for v in spec["volumes"])
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["runAsUser"] == 10001 and sc["runAsNonRoot"] is True
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert set(c["resources"]["limits"]) == {"cpu", "memory", "ephemeral-storage"}
            assert not any(e["name"].startswith(("AUTOPATCH", "GITHUB", "KUBE")) for e in c["env"])
        box = next(c for c in spec["containers"] if c["name"] == "box")
        assert {m["mountPath"]: m.get("readOnly", False) for m in box["volumeMounts"]} == \
            {"/tmp": False, "/tmp/workspace": False, "/tmp/trees": False, "/repo": True}
        # The resource limits are the box's settings, requested as limited (a fork bomb
        # meets the kubelet's podPidsLimit; there is no per-pod pids field).
        assert box["resources"]["limits"] == box["resources"]["requests"] == {
            "memory": str(256 << 20), "cpu": "500m", "ephemeral-storage": str(64 << 20)}
        sizes = {v["name"]: v["emptyDir"]["sizeLimit"] for v in spec["volumes"]}
        assert sizes == {"tmp": str(16 << 20), "workspace": str(32 << 20),
                         "trees": str(48 << 20), "repo": str(32 << 20)}, sizes
        assert "runtimeClassName" not in spec  # none configured
        assert sb.leftovers() == []
    finally:
        stub.close()


def test_box_pods_without_the_hardening_are_refused(tmp_path):
    """The stand-in's admission check for box pods (the rest of issue 15's list, beyond the
    restricted standard) refuses a pod that lacks it, naming each rule."""
    stub = k8s_util.K8sStub(tmp_path / "s")
    try:
        ns = k8s_util.NAMESPACE
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "autopatch-x-1", "labels": {
                   "autopatch.owner": "x", "autopatch.box": "autopatch-x-1"}},
               "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "volumes": [{"name": "w", "emptyDir": {}}],
                        "containers": [{"name": "box", "image": IMAGE, "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}}}]}}
        code, body = stub.api("POST", f"/api/v1/namespaces/{ns}/pods", pod)
        assert code == 403 and body["reason"] == "Forbidden", body
        msg = body["message"]
        for rule in ("automountServiceAccountToken must be false",
                     "enableServiceLinks must be false", "activeDeadlineSeconds",
                     'volume "w" must be an emptyDir with medium Memory and a sizeLimit',
                     'container "box" must run as 10001:10001',
                     "readOnlyRootFilesystem=true", "resources.limits.memory",
                     "resources.limits.ephemeral-storage",
                     "a NetworkPolicy denying all egress must select the pod"):
            assert rule in msg, (rule, msg)
        # The same pod without the owner label is no box: only the restricted standard applies.
        pod["metadata"]["labels"] = {"app": "other"}
        code, body = stub.api("POST", f"/api/v1/namespaces/{ns}/pods", pod)
        assert code == 201, body
        stub.api("DELETE", f"/api/v1/namespaces/{ns}/pods/autopatch-x-1")
    finally:
        stub.close()


def test_a_required_runtime_class_is_enforced(tmp_path, autopatch_bin):
    """A cluster that admits box pods only under gVisor (the stand-in's gvisor class runs
    runc here): without AUTOPATCH_K8S_RUNTIME_CLASS the box is refused in one line, with it the
    pod names the class and runs."""
    stub = k8s_util.K8sStub(tmp_path / "s", extra=("--require-runtime-class", "gvisor",
                                                   "--runtime-class", "gvisor=runc"))
    try:
        (tmp_path / "a").mkdir()
        sb = Sandbox(autopatch_bin, tmp_path / "a", backend="kubernetes", stub=stub)
        r = _run(sb, "true")
        assert r.returncode == 125
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert 'spec.runtimeClassName must be "gvisor" (got none)' in lines[0]
        assert sb.leftovers() == []
        (tmp_path / "b").mkdir()
        sb = Sandbox(autopatch_bin, tmp_path / "b", backend="kubernetes", stub=stub,
                     extra_env={"AUTOPATCH_K8S_RUNTIME_CLASS": "gvisor"})
        r = _run(sb, "sh", "-c", "echo under-the-class")
        assert r.returncode == 0 and r.stdout == "under-the-class\n", r.stderr
        assert sb.leftovers() == []
    finally:
        stub.close()


def test_deploy_manifests_are_valid_objects():
    """deploy/kubernetes/*.yaml against the official schemas (kubernetes-models)."""
    files = sorted(str(p) for p in (ROOT / "deploy/kubernetes").glob("*.yaml")
                   if p.name != "kustomization.yaml")
    r = subprocess.run(["node", str(k8s_util.STUB / "validate.js"), *files], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    kinds = {line.split(": ")[1].split("/")[0] for line in r.stdout.splitlines()}
    assert {"Namespace", "ServiceAccount", "Role", "RoleBinding", "Deployment", "Service",
            "Secret", "RuntimeClass", "NetworkPolicy"} <= kinds


def test_a_long_command_line_runs_unchanged(tmp_path, autopatch_bin):
    """libwebsockets cuts a request line past 2 KiB: a longer argv travels through a file in
    the box (docs/kubernetes.md, "Exec"), with the command's own exit status and quoting."""
    stub = k8s_util.K8sStub(tmp_path / "s")
    try:
        sb = Sandbox(autopatch_bin, tmp_path, backend="kubernetes", stub=stub)
        word = "it's \"quoted\" $HOME `x` \\ " * 150  # about 4 KiB, every shell character
        r = _run(sb, "sh", "-c", 'printf %s "$1" | wc -c; ls /tmp/.ap-argv | wc -l; exit 7',
                 "sh", word)
        assert r.returncode == 7, r.stderr
        assert r.stdout.split() == [str(len(word.encode())), "0"], r.stdout
        assert sb.leftovers() == []
    finally:
        stub.close()
