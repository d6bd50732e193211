"""Helpers for the scale-out tests: several `autopatch serve` replicas on one PostgreSQL queue,
behind a real nginx running deploy/nginx/autopatch.conf, with one GitHub stand-in.

`Cluster` is a pipeline `Rig` (the stand-ins, the signed deliveries, the observations) whose
database is a throw-away PostgreSQL server (pg_util.PgServer) and whose deliveries go through
nginx to replicas[0..n). Each replica is its own process with its own port and data directory
(per host: warm pool, clone cache, trajectories), all sharing the database.

Every wait polls real state (the queue through `autopatch jobs`, the stand-ins' recorded
requests, /proc) against a generous deadline, so a loaded machine makes the tests slower, not
flaky; a timeout says what was awaited and shows the jobs and every replica's log.
"""
import base64
import json
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

from pg_util import PgServer
from pipeline_util import Rig, free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
NGINX_CONF = ROOT / "deploy" / "nginx" / "autopatch.conf"
WRITE_METHODS = ("POST", "PATCH", "PUT", "DELETE")
START_TIMEOUT = 120  # a replica's (or nginx's) first /healthz on a loaded machine
POST_TIMEOUT = 60  # one delivery through nginx (its proxy_read_timeout is 30 s)


class Replica:
    def __init__(self, cluster, index, workers):
        self.cluster = cluster
        self.index = index
        self.workers = workers
        self.port = free_port()
        self.log = cluster.tmp / f"replica{index}.log"
        self.proc = None
        self.stopped = False  # stopped (or killed) by the test on purpose
        self.model = None  # its own model stand-in (else the cluster's)
        self.extra_env = {}  # settings of this replica only, over the cluster's

    def env(self):
        e = self.cluster.env()
        e.update({"PORT": str(self.port), "AUTOPATCH_WORKERS": str(self.workers),
                  "AUTOPATCH_DATA_DIR": str(self.cluster.tmp / f"data{self.index}")})
        if self.model:
            e["AUTOPATCH_LLM_BASE_URL"] = self.model.url + "/v1"
        e.update(self.extra_env)
        return e

    def start(self):
        log = open(self.log, "ab")
        self.proc = subprocess.Popen([self.cluster.bin, "serve"], env=self.env(), stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.stopped = False
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"replica {self.index} exited:\n{self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz",
                                            timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"replica {self.index} did not answer /healthz within "
                             f"{START_TIMEOUT} s:\n{self.log_text()[-3000:]}")

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def proc_state(self):
        """The kernel's state letter for the process (T: stopped by a signal), or None."""
        try:
            stat = pathlib.Path(f"/proc/{self.pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError, TypeError):
            return None
        return stat.rpartition(")")[2].split()[0]

    def freeze(self, timeout=30):
        """SIGSTOP, and wait until the kernel reports every thread stopped."""
        self.send(signal.SIGSTOP)
        deadline = time.time() + timeout
        while time.time() < deadline:
            tasks = pathlib.Path(f"/proc/{self.pid}/task")
            states = set()
            for t in tasks.iterdir():
                try:
                    states.add((t / "stat").read_text().rpartition(")")[2].split()[0])
                except FileNotFoundError:
                    pass
            if states == {"T"}:
                return time.time()
            time.sleep(0.05)
        raise AssertionError(f"replica {self.index} did not stop after SIGSTOP within "
                             f"{timeout} s (state {self.proc_state()})")

    def stop(self, sig=signal.SIGTERM):
        self.stopped = True
        if self.alive():
            if sig != signal.SIGCONT:
                self.proc.send_signal(signal.SIGCONT)  # a frozen one must be able to exit
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class Cluster(Rig):
    def __init__(self, tmp, autopatch_bin, replicas=2, workers=1, script=None, env=None,
                 lease_seconds=10):
        super().__init__(tmp, autopatch_bin, script=script, env=env, workers=workers)
        # The lease is short so rescues are quick, but long enough (heartbeat every third of
        # it) that a replica starved of CPU for a few seconds keeps its job.
        self.lease_seconds = lease_seconds
        self.pg = None
        self.nginx = None
        self.nginx_port = free_port()
        self.replicas = [Replica(self, i, workers) for i in range(replicas)]

    def start(self, serve=True):
        self.pg = PgServer().start()  # under /tmp: the server user must reach it
        super().start(serve=False)
        if serve:
            for r in self.replicas:
                r.start()
            self.start_nginx()
        return self

    def env(self):
        e = super().env()
        # The rescue scan every second (default: a third of the lease): a dead replica's job
        # is taken again within about lease + 1 s, not lease + lease / 3.
        e.update({"AUTOPATCH_DB": self.pg.uri,
                  "AUTOPATCH_LEASE_SECONDS": str(self.lease_seconds),
                  "AUTOPATCH_RESCUE_SECONDS": "1",
                  "AUTOPATCH_MAX_CONNECTIONS_PER_IP": "0"})
        e.update(self.extra_env)
        return e

    # ---- nginx ------------------------------------------------------------------------
    def nginx_conf(self):
        """deploy/nginx/autopatch.conf with its upstream servers and listen address replaced
        by this cluster's, inside the smallest nginx.conf that runs it unprivileged."""
        site = NGINX_CONF.read_text()
        servers = "".join(f"    server 127.0.0.1:{r.port} max_fails=1 fail_timeout=5s;\n"
                          for r in self.replicas)
        site, n = re.subn(r"(upstream autopatch_replicas \{\n)(?:\s*#.*\n)?(?:\s*server .*\n)+",
                          lambda m: m.group(1) + servers, site)
        assert n == 1, "deploy/nginx/autopatch.conf: no upstream block found"
        site, n = re.subn(r"listen 80;", f"listen 127.0.0.1:{self.nginx_port};", site)
        assert n == 1, "deploy/nginx/autopatch.conf: no `listen 80;`"
        d = self.tmp / "nginx"
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o777)
        (d / "autopatch.conf").write_text(site)
        user = "user root root;\n" if os.geteuid() == 0 else ""
        (d / "nginx.conf").write_text(
            f"{user}worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            f"  access_log {d}/access.log;\n"
            f"  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n"
            f"  fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi;\n"
            f"  scgi_temp_path {d}/scgi;\n"
            f"  include {d}/autopatch.conf;\n"
            "}\n")
        return d

    def start_nginx(self):
        d = self.nginx_conf()
        nginx = "/usr/sbin/nginx"
        check = subprocess.run([nginx, "-t", "-p", str(d), "-c", str(d / "nginx.conf"),
                                "-e", str(d / "error.log")], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        self.nginx = subprocess.Popen([nginx, "-p", str(d), "-c", str(d / "nginx.conf"),
                                       "-e", str(d / "error.log"), "-g", "daemon off;"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.nginx.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.nginx_port}/healthz",
                                            timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        raise AssertionError("nginx did not answer /healthz (through it, a replica's) within "
                             f"{START_TIMEOUT} s: " + (d / "error.log").read_text())

    # ---- deliveries go through nginx ----------------------------------------------------
    def _post_at(self, port, event, payload, delivery):
        # The port is an argument, never a swapped attribute: the tests post from threads.
        return Rig.post(self, event, payload, delivery, timeout=POST_TIMEOUT, port=port)

    def post(self, event, payload, delivery=None):
        return self._post_at(self.nginx_port, event, payload, delivery)

    def post_to(self, replica, event, payload, delivery=None):
        """Straight to one replica, bypassing nginx."""
        return self._post_at(replica.port, event, payload, delivery)

    # ---- lifecycle ----------------------------------------------------------------------
    def stop(self):
        for r in self.replicas:
            r.stop()
            if r.model:
                r.model.stop()
        if self.nginx and self.nginx.poll() is None:
            self.nginx.terminate()
            self.nginx.wait(timeout=30)
        try:
            super().stop()
        finally:
            if self.pg:
                self.pg.cleanup()

    def log_text(self):
        return "\n".join(f"--- replica {r.index} ---\n{r.log_text()[-3000:]}"
                         for r in self.replicas)

    def wait(self, pred, timeout=240, what="condition"):
        """Poll pred until it is true (returns its value); fails naming what was awaited when
        the deadline passes or a replica the test did not stop has exited."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            last = pred()
            if last:
                return last
            dead = [r.index for r in self.replicas
                    if r.proc is not None and not r.stopped and not r.alive()]
            if dead:
                raise AssertionError(f"replica(s) {dead} exited while waiting for {what}; "
                                     f"jobs={self.safe_jobs()}\n" + self.log_text())
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                             f"jobs={self.safe_jobs()}\n" + self.log_text())

    # ---- observations -------------------------------------------------------------------
    def events(self, job_id):
        out = subprocess.run([self.bin, "jobs", "--id", str(job_id), "--json"], env=self.env(),
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return [e.get("message") or "" for e in json.loads(out.stdout).get("events", [])]

    def leases(self, job_id):
        """The lease owners of a job, in order ("host:pid:start/wN")."""
        return [m.split()[2] for m in self.events(job_id) if m.startswith("leased by ")]

    def replica_of(self, owner):
        pid = int(owner.split(":")[1])
        for r in self.replicas:
            if r.pid == pid:
                return r
        raise AssertionError(f"no replica has pid {pid}")


def request_tokens(req):
    """The credential a recorded stand-in request carried (installation token or JWT)."""
    auth = req.get("auth") or ""
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value).decode().partition(":")[2]
        except ValueError:
            return value
    return value


def is_write(req):
    """A request that changes something on GitHub: a REST write or a git push."""
    path = req.get("path") or ""
    query = json.dumps(req.get("query") or "")
    if "git-receive-pack" in path or "git-receive-pack" in query:
        return True
    return req.get("method") in WRITE_METHODS and "/access_tokens" not in path
