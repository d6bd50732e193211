"""A throw-away PostgreSQL server for the tests (Debian's postgresql package).

`PgServer().start()` copies a cluster made once a process (initdb) into a temporary directory
and runs pg_ctl there as a non-root user (as root it creates the system user `autopatch-pg`
first), listening on a unix socket in that directory and on a free 127.0.0.1 port, with trust
authentication for the user `autopatch` and a database `autopatch`. `uri` is what
AUTOPATCH_DB takes. Anything that goes wrong raises: a test that needs PostgreSQL fails, it
never skips.

Also a program:
  python3 pg_util.py -- CMD ARGS...   start a server, run CMD with AP_TEST_PG_URI set, stop
                                      the server, exit with CMD's status (the meson wrapper)
  python3 pg_util.py start DIR        start a server in DIR (new, empty); print its URI
  python3 pg_util.py stop DIR         stop it and delete DIR (the benchmark's)
"""
import atexit
import glob
import os
import pathlib
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

from ports import free_port

PG_USER = "autopatch-pg"


def pg_bin_dir():
    """The newest /usr/lib/postgresql/N/bin that has initdb."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if not found:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql; "
                           "scripts/bootstrap.sh does)")
    return pathlib.Path(found[-1]).parent




def ensure_user():
    """As root: the unprivileged system user the server runs as (initdb refuses root)."""
    try:
        return pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        PG_USER], check=True, capture_output=True)
        return pwd.getpwnam(PG_USER)


_TEMPLATE = {}


def _template(bin_dir):
    """The data directory of a stopped cluster made once a process (initdb alone takes
    seconds on a loaded machine), with the settings and the database every test server has:
    a server's start copies it. Removed when the process exits."""
    if "data" not in _TEMPLATE:
        t = PgServer(from_template=False)
        atexit.register(shutil.rmtree, t.dir, True)
        t.start()
        t.stop()
        _TEMPLATE["data"] = t.data
    return _TEMPLATE["data"]


class PgServer:
    def __init__(self, tmp=None, directory=None, from_template=True):
        self.bin = pg_bin_dir()
        self.from_template = from_template
        if directory:
            self.dir = pathlib.Path(directory)
            self.dir.mkdir(parents=True, exist_ok=True)
        else:
            self.dir = pathlib.Path(tempfile.mkdtemp(prefix="ap-pg-", dir=tmp))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        port_file = self.dir / "port"
        self.port = int(port_file.read_text()) if port_file.exists() else free_port()
        port_file.write_text(str(self.port))
        self.user = None
        self.running = False
        if os.geteuid() == 0:
            self.user = ensure_user()
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.dir, 0o755)

    @property
    def uri(self):
        return f"postgresql://autopatch@127.0.0.1:{self.port}/autopatch"

    @property
    def socket_uri(self):
        return f"postgresql:///autopatch?host={self.dir}&port={self.port}&user=autopatch"

    def _demote(self):
        if self.user:
            os.setgid(self.user.pw_gid)
            os.setgroups([])
            os.setuid(self.user.pw_uid)

    def _run(self, *argv, check=True, timeout=120):
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(self.dir)}
        out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env,
                             preexec_fn=self._demote, cwd=self.dir, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({out.returncode}): {out.stdout}{out.stderr}"
                               + self.log_text()[-2000:])
        return out

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")
        except (FileNotFoundError, PermissionError):
            return ""

    def start(self):
        createdb = False
        if not self.data.exists():
            if self.from_template:
                subprocess.run(["cp", "-a", str(_template(self.bin)), str(self.data)],
                               check=True, capture_output=True)
            else:
                self._run(self.bin / "initdb", "-D", self.data, "-U", "autopatch",
                          "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
                with open(self.data / "postgresql.conf", "a") as f:
                    f.write("listen_addresses = '127.0.0.1'\nmax_connections = 200\n"
                            "fsync = on\nsynchronous_commit = on\nshared_buffers = 32MB\n")
                createdb = True
            # This server's own port and socket (the file's last setting wins: a template's
            # are overridden).
            with open(self.data / "postgresql.conf", "a") as f:
                f.write(f"port = {self.port}\nunix_socket_directories = '{self.dir}'\n")
        self._run(self.bin / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60",
                  "start")
        self.running = True
        if createdb:
            self._run(self.bin / "createdb", "-h", self.dir, "-p", self.port, "-U", "autopatch",
                      "autopatch")
        return self

    def stop(self, mode="fast"):
        if self.running:
            self._run(self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60",
                      "stop", check=False)
            self.running = False

    def restart(self, mode="fast"):
        self.stop(mode)
        self.start()

    def psql(self, sql):
        """Run sql as the superuser; returns the unaligned, tuples-only output."""
        out = self._run(self.bin / "psql", "-h", self.dir, "-p", self.port, "-U", "autopatch",
                        "-d", "autopatch", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql)
        return out.stdout.strip()

    def cleanup(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv):
    if len(argv) == 2 and argv[0] in ("start", "stop"):
        pg = PgServer(directory=argv[1], from_template=False)
        if argv[0] == "start":
            pg.start()
            print(pg.uri)
        else:
            pg.running = True
            pg.cleanup()
        return 0
    if "--" not in argv:
        print("usage: pg_util.py -- CMD [ARGS...]", file=sys.stderr)
        return 2
    cmd = argv[argv.index("--") + 1:]
    try:
        pg = PgServer(from_template=False).start()
    except Exception as e:  # noqa: BLE001 - the test fails with the reason
        print(f"cannot start PostgreSQL for the test: {e}", file=sys.stderr)
        return 1
    try:
        env = dict(os.environ, AP_TEST_PG_URI=pg.uri, AP_TEST_PG_SOCKET_URI=pg.socket_uri)
        return subprocess.run(cmd, env=env).returncode
    finally:
        pg.cleanup()


if __name__ == "__main__":
    start = time.time()
    sys.exit(main(sys.argv[1:]))
