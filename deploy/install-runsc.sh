#!/usr/bin/env bash
# deploy/install-runsc.sh - register gVisor's runsc with dockerd on a production host, as root,
# idempotently: installs Debian's runsc when it is missing, merges a "runsc" entry into
# /etc/docker/daemon.json (every other setting and runtime is kept; the file is never
# overwritten blindly), and makes a running dockerd reload its configuration (SIGHUP: running
# containers are not touched). Then set AUTOPATCH_SANDBOX_RUNTIME=runsc for autopatch.
#
# usage: deploy/install-runsc.sh [--platform ptrace|kvm|systrap] [--daemon-json PATH]
#                                [--runsc PATH] [--no-install] [--no-reload]
#
# --platform   gVisor platform (default ptrace: works everywhere, also without /dev/kvm;
#              kvm is faster where the host exposes /dev/kvm and runsc supports it)
# --daemon-json, --no-reload: for trying it on a copy (the tests do)
#
# The entry always carries --network=none: with it a container with NetworkMode "none" starts
# (without it runsc tries to set up networking itself and fails). Exit 0 when registered (or
# already was), 1 on error with one line saying what to do.
set -euo pipefail

log() { printf '[install-runsc] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

platform=ptrace
daemon_json=/etc/docker/daemon.json
runsc=
install=1
reload=1
while (($#)); do
  case $1 in
    --platform) platform=${2:?--platform needs a value}; shift 2 ;;
    --daemon-json) daemon_json=${2:?--daemon-json needs a path}; shift 2 ;;
    --runsc) runsc=${2:?--runsc needs a path}; shift 2 ;;
    --no-install) install=0; shift ;;
    --no-reload) reload=0; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
case $platform in ptrace|kvm|systrap) ;; *) die "unknown platform: $platform" ;; esac

if [[ -z $runsc ]]; then
  runsc=$(command -v runsc || true)
  if [[ -z $runsc ]] && ((install)); then
    ((EUID == 0)) || die "runsc is not installed; run as root to install it"
    command -v apt-get >/dev/null || die "runsc is not installed and there is no apt-get: install gVisor's runsc by hand"
    log "installing runsc"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runsc >/dev/null
    runsc=$(command -v runsc || true)
  fi
  [[ -n $runsc ]] || die "runsc not found (install it, or pass --runsc PATH)"
fi
[[ -x $runsc ]] || die "$runsc is not executable"
runsc=$(readlink -f "$runsc")
if [[ $platform == kvm && ! -c /dev/kvm ]]; then
  die "--platform kvm needs /dev/kvm; use --platform ptrace"
fi

# Merge with python3's json module: keep every other key, refuse a file that is not JSON.
mkdir -p "$(dirname "$daemon_json")"
changed=$(/usr/bin/python3 - "$daemon_json" "$runsc" "$platform" <<'EOF'
import json, os, sys, tempfile

path, runsc, platform = sys.argv[1:4]
want = {"path": runsc, "runtimeArgs": ["--platform=" + platform, "--network=none"]}
conf = {}
if os.path.exists(path):
    text = open(path, encoding="utf-8").read()
    if text.strip():
        try:
            conf = json.loads(text)
        except ValueError as e:
            sys.exit(f"{path} is not valid JSON ({e}); fix it first, nothing was changed")
        if not isinstance(conf, dict):
            sys.exit(f"{path} is not a JSON object; fix it first, nothing was changed")
runtimes = conf.setdefault("runtimes", {})
if not isinstance(runtimes, dict):
    sys.exit(f'"runtimes" in {path} is not an object; fix it first, nothing was changed')
if runtimes.get("runsc") == want:
    print("no")
    sys.exit(0)
runtimes["runsc"] = want
mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644
fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=os.path.dirname(os.path.abspath(path)))
with os.fdopen(fd, "w", encoding="utf-8") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
os.chmod(tmp, mode)
if os.path.exists(path):
    with open(path, "rb") as src, open(path + ".autopatch-bak", "wb") as dst:
        dst.write(src.read())
os.replace(tmp, path)
print("yes")
EOF
) || die "could not update $daemon_json"

if [[ $changed == yes ]]; then
  log "registered runsc ($runsc, --platform=$platform) in $daemon_json"
else
  log "runsc already registered in $daemon_json"
fi
((reload)) || exit 0

# A running dockerd re-reads "runtimes" on SIGHUP (systemd's docker.service maps reload to it).
docker_pid=$(pidof dockerd || true)
if [[ -z $docker_pid ]]; then
  log "dockerd is not running; it will pick runsc up when it starts"
  exit 0
fi
if [[ $changed == yes ]]; then
  if command -v systemctl >/dev/null && systemctl is-active --quiet docker 2>/dev/null; then
    systemctl reload docker
  else
    kill -HUP $docker_pid
  fi
fi
for _ in $(seq 50); do
  if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    log "dockerd lists runsc"
    exit 0
  fi
  sleep 0.2
done
die "dockerd does not list runsc after a reload; restart it (systemctl restart docker) and check its log"
