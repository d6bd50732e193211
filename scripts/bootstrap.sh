#!/usr/bin/env bash
# scripts/bootstrap.sh - install everything autopatch needs on Debian 12, as root, idempotently:
# apt packages, a running Docker engine (with gVisor registered), the sandbox image, the npm
# test fixtures, and the build. Safe to run twice; a second run does almost nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[bootstrap] %s\n' "$*" >&2; }

APT_PACKAGES=(
  build-essential meson ninja-build pkg-config clang clang-format libclang-rt-14-dev
  libmicrohttpd-dev libcurl4-openssl-dev libcjson-dev libssl-dev libgit2-dev libsqlite3-dev
  libyaml-dev libpcre2-dev libcmocka-dev libwebsockets-dev libpq-dev zlib1g-dev libzstd-dev postgresql
  python3 python3-pytest python3-pytest-xdist python3-yaml git sqlite3 openssl curl ca-certificates chromium
  docker.io runsc mmdebstrap iptables wrk nginx nodejs npm
)

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need_apt+=("$p")
done
# nodejs/npm may come from elsewhere on some machines: only install them when missing.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=(); for p in "${need_apt[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  need_apt=("${tmp[@]+"${tmp[@]}"}")
fi
if ((${#need_apt[@]})); then
  log "installing: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The PostgreSQL tests run a throw-away server (initdb + pg_ctl) as this unprivileged user:
# initdb refuses to run as root (tests/e2e/pg_util.py creates it too when missing).
if [[ $(id -u) == 0 ]] && ! id autopatch-pg >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin autopatch-pg
fi

# gVisor: register runsc with dockerd (the same script a production host runs: it merges the
# entry into /etc/docker/daemon.json and makes a running dockerd reload it).
deploy/install-runsc.sh --no-install

docker_up() { timeout 10 docker info >/dev/null 2>&1; }
if ! docker_up; then
  if command -v systemctl >/dev/null && systemctl start docker 2>/dev/null && docker_up; then
    :
  else
    log "starting dockerd"
    mkdir -p /var/log
    nohup dockerd >/var/log/autopatch-dockerd.log 2>&1 &
    for _ in $(seq 120); do docker_up && break; sleep 0.5; done
  fi
fi
docker_up || { log "dockerd did not start; see /var/log/autopatch-dockerd.log"; exit 1; }

# The sandbox image, from Debian packages, skipped when its content hash is already present.
deploy/sandbox-image/build.sh

# Real GitHub webhook payloads for the tests, and the test runners of the runner fixtures
# (mocha, jest, vitest), at pinned versions.
if [[ ! -d tests/fixtures/node_modules/@octokit/webhooks-examples ||
      ! -d tests/fixtures/node_modules/mocha || ! -d tests/fixtures/node_modules/jest ||
      ! -d tests/fixtures/node_modules/vitest ]]; then
  log "installing npm test fixtures"
  (cd tests/fixtures && npm install --no-package-lock --no-audit --no-fund --loglevel=error)
fi

# playwright-core for the console's browser tests, at the version pinned by the lockfile; it
# drives Debian's /usr/bin/chromium (installed above) and never downloads a browser.
pw_want=$(sed -n 's/.*"playwright-core": "\([0-9.]*\)".*/\1/p' tests/browser/package.json)
pw_have=$(sed -n 's/^  "version": "\([0-9.]*\)".*/\1/p' \
  tests/browser/node_modules/playwright-core/package.json 2>/dev/null || true)
if [[ $pw_have != "$pw_want" ]]; then
  log "installing the browser-test driver (playwright-core)"
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

# A real npm registry (verdaccio) for tests/e2e/test_environments.py, pinned by its lockfile.
if [[ ! -x standins/verdaccio/node_modules/.bin/verdaccio ]]; then
  log "installing the verdaccio stand-in"
  (cd standins/verdaccio && npm ci --no-audit --no-fund --loglevel=error)
fi

# The Kubernetes API stand-in's packages (kubernetes-models, ws, js-yaml; @kubernetes/client-node
# to check it), exactly as package-lock.json pins them; skipped when already there.
if [[ ! -f standins/k8s_stub/node_modules/.package-lock.json ]] ||
   ! cmp -s standins/k8s_stub/package-lock.json standins/k8s_stub/node_modules/.autopatch-lock; then
  log "installing the Kubernetes stand-in's npm packages"
  (cd standins/k8s_stub && npm ci --no-audit --no-fund --loglevel=error &&
   cp package-lock.json node_modules/.autopatch-lock)
fi

# Commit messages a reviewer can scan: the hook refuses one that is not `area: what changed`
# (at most 72 characters), a blank line and a body (docs/README.md, "Commits").
if git rev-parse --git-dir >/dev/null 2>&1; then
  git config core.hooksPath scripts/hooks
fi

log "building"
if [[ -f build/build.ninja ]]; then ninja -C build >/dev/null; else meson setup build >/dev/null && ninja -C build >/dev/null; fi
log "ready"
