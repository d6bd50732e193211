"""The Kubernetes API stand-in (standins/k8s_stub/server.js) for the end-to-end tests: a CA
and a server certificate made with openssl, a bearer token and a client certificate, a
kubeconfig naming them, and the stand-in running with the Role of deploy/kubernetes/rbac.yaml.
Its pods are real local Docker containers labelled k8sstub.pod=<pod name>.

The stand-in deletes pods as a real API server and kubelet do (grace 0: the object goes at
once, the containers later; graceful: the object stays until they are gone) and honours
fieldValidation. Its report (K8sStub.report()) lists what a real cluster would hide: Warning
headers it sent, writes from autopatch without fieldValidation=Strict, moments a box's
container ran with no deny-all NetworkPolicy, the Host and Origin of each exec upgrade;
close() fails the test when any of the first three happened."""
import json
import os
import pathlib
import secrets
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUB = ROOT / "standins" / "k8s_stub"
NAMESPACE = "autopatch-sandbox"
POD_PIDS_LIMIT = 64  # the stand-in's kubelet podPidsLimit (the fork-bomb tests use 64 on Docker too)


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "server.crt").exists():
        return d
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=k8s-stub-ca", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn, ext in (("server", "localhost", ["-extfile", "san.cnf"]),
                          ("client", "autopatch-client", [])):
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *ext, cwd=d)
    return d


class K8sStub:
    """One stand-in process. kubeconfig(auth) writes a kubeconfig for "token" or "cert"."""

    def __init__(self, workdir, protocols=None, role=None, extra=()):
        self.dir = make_pki(pathlib.Path(workdir) / "pki")
        self.token = secrets.token_hex(16)
        argv = ["node", str(STUB / "server.js"), "--cert", str(self.dir / "server.crt"),
                "--key", str(self.dir / "server.key"), "--ca", str(self.dir / "ca.crt"),
                "--token", self.token, "--namespace", NAMESPACE,
                "--role", str(role or ROOT / "deploy" / "kubernetes" / "rbac.yaml"),
                "--pod-pids-limit", str(POD_PIDS_LIMIT), *extra]
        if protocols:
            argv += ["--protocols", ",".join(protocols)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("k8s stub did not start: " + self.proc.stderr.read())
        self.port = json.loads(line)["port"]
        self.server = f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, path, auth="token", inline=False):
        d = self.dir
        cluster = ({"certificate-authority-data": _b64(d / "ca.crt")} if inline
                   else {"certificate-authority": str(d / "ca.crt")})
        cluster["server"] = self.server
        if auth == "token":
            user = {"token": self.token}
        elif inline:
            user = {"client-certificate-data": _b64(d / "client.crt"),
                    "client-key-data": _b64(d / "client.key")}
        else:
            user = {"client-certificate": str(d / "client.crt"),
                    "client-key": str(d / "client.key")}
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "stub",
               "clusters": [{"name": "stub", "cluster": cluster}],
               "users": [{"name": "u", "user": user}],
               "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "u",
                                                         "namespace": NAMESPACE}}]}
        path = pathlib.Path(path)
        # JSON is YAML: the kubeconfig loader reads either.
        path.write_text(json.dumps(cfg, indent=1))
        return path

    def api(self, method, path, body=None):
        """One request with the token: (status, parsed answer)."""
        import ssl
        import urllib.error
        import urllib.request
        ctx = ssl.create_default_context(cafile=str(self.dir / "ca.crt"))
        req = urllib.request.Request(self.server + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def report(self):
        """What the stand-in recorded (see the module's docstring)."""
        code, body = self.api("GET", "/stub/report")
        assert code == 200, body
        return body

    def assert_clean(self):
        """No Warning header sent, every write of autopatch strict, no box uncovered."""
        rep = self.report()
        assert rep["warnings"] == [], f"the API server sent Warning headers: {rep['warnings']}"
        assert rep["unvalidated"] == [], f"writes without fieldValidation=Strict: {rep['unvalidated']}"
        assert rep["overlaps"] == [], \
            f"a box's container ran without a deny-all NetworkPolicy: {rep['overlaps']}"

    def owned_objects(self, owner):
        """Names of the owner's pods and NetworkPolicies the stand-in holds ("pod/x")."""
        found = []
        for kind, path in (("pod", f"/api/v1/namespaces/{NAMESPACE}/pods"),
                           ("networkpolicy", f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}"
                                             "/networkpolicies")):
            code, body = self.api("GET", f"{path}?labelSelector=autopatch.owner%3D{owner}")
            assert code == 200, body
            found += [f"{kind}/{i['metadata']['name']}" for i in body["items"]]
        return found

    def delete_owned(self, owner):
        """Pods first (gracefully), their policies once the pods are gone."""
        names = self.owned_objects(owner)
        for name in names:
            kind, n = name.split("/")
            if kind == "pod":
                self.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{n}")
        for _ in range(300):
            if not any(x.startswith("pod/") for x in self.owned_objects(owner)):
                break
            time.sleep(0.1)
        for name in names:
            kind, n = name.split("/")
            if kind != "pod":
                self.api("DELETE", f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}"
                                   f"/networkpolicies/{n}")

    def env(self, kubeconfig):
        return {"AUTOPATCH_SANDBOX_BACKEND": "kubernetes", "KUBECONFIG": str(kubeconfig),
                "AUTOPATCH_K8S_NAMESPACE": NAMESPACE}

    def close(self, check=True):
        """Stop the stand-in; with check, fail when its report is not clean (assert_clean)."""
        err = None
        if check and self.proc.poll() is None:
            try:
                self.assert_clean()
            except AssertionError as e:
                err = e
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if err:
            raise err


def _b64(path):
    import base64
    return base64.b64encode(pathlib.Path(path).read_bytes()).decode()


def stub_containers(pod_prefix="", container=None):
    """Docker containers the stand-in runs for pods whose name starts with pod_prefix (only
    the one of that container name, when given: "box", "loader")."""
    out = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter", "label=k8sstub.pod"],
                         capture_output=True, text=True, check=True)
    ids = out.stdout.split()
    if not ids or not pod_prefix:
        return ids
    out = subprocess.run(["docker", "inspect", "-f",
                          '{{.Id}} {{index .Config.Labels "k8sstub.pod"}} {{.Name}}', *ids],
                         capture_output=True, text=True)
    found = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) != 3 or not parts[1].startswith(pod_prefix):
            continue
        if container and parts[2] != f"/k8sstub-{parts[1]}-{container}":
            continue
        found.append(parts[0])
    return found


def box_container(pod):
    """The Docker id of a pod's box container, or None."""
    out = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", f"k8sstub-{pod}-box"],
                         capture_output=True, text=True)
    return out.stdout.strip() or None
