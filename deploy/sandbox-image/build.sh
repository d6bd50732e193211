#!/usr/bin/env bash
# deploy/sandbox-image/build.sh - build autopatch's sandbox images from Debian packages with
# mmdebstrap + `docker import`, one per toolchain flavour, each tagged by a content hash of its
# inputs (suite, base.txt, flavors/NAME.txt, this script). A flavour whose hash tag exists is
# skipped, so reruns take a second.
#
# Images: REPO:NAME and REPO:NAME-HASH for every flavour, REPO being AUTOPATCH_FLAVOR_REPOSITORY
# (default autopatch-sandbox, which autopatch sets when it builds a flavour on first use); the
# default flavour (python) is also REPO:latest, the default AUTOPATCH_SANDBOX_IMAGE. The
# content-hash tag autopatch-sandbox:NAME-HASH is the cache whatever REPO is: an image with the
# same inputs is tagged, not built again.
# Debian 13 (trixie) by default; AUTOPATCH_SANDBOX_SUITE=bookworm builds from Debian 12 (the
# suite is part of the hash). Each image carries the labels autopatch.suite and
# autopatch.toolchain ("go 1.24.4, gcc 14.2.0, make 4.4.1"): versions read by running the tools
# inside the built root, which `autopatch doctor`, the job's evidence and the PR show.
#
# Usage: build.sh                       the default flavour (python)
#        build.sh --flavor NAME         one flavour (python node go rust java c)
#        build.sh --all                 every flavour
#        build.sh [--flavor NAME] --print-tag   print the content-hash tag, build nothing
#        build.sh --list                the flavours, one per line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../debian-image.sh
source "$here/../debian-image.sh"
suite=${AUTOPATCH_SANDBOX_SUITE:-trixie}
cache=autopatch-sandbox
name=${AUTOPATCH_FLAVOR_REPOSITORY:-$cache}
default_flavor=python

flavors() { for f in "$here"/flavors/*.txt; do basename "$f" .txt; done; }

list_pkgs() { # flavour -> its packages (base + flavour), sorted, unique
  cat "$here/base.txt" "$here/flavors/$1.txt" | grep -v '^\s*#' | sed '/^\s*$/d' | sort -u
}

probes() { # flavour -> "name command" lines whose output's first version number is the label
  case $1 in
    python) printf '%s\n' 'python python --version' 'pytest pytest --version' \
              'tox tox --version' 'nox nox --version' 'pip pip3 --version' ;;
    node) printf '%s\n' 'node node --version' 'npm npm --version' ;;
    go) printf '%s\n' 'go go version' 'gcc gcc -dumpfullversion' ;;
    rust) printf '%s\n' 'rustc rustc --version' 'cargo cargo --version' ;;
    java) printf '%s\n' 'java java -version' 'maven mvn -v' \
            'gradle gradle --version 2>/dev/null | grep ^Gradle' ;;
    c) printf '%s\n' 'gcc gcc -dumpfullversion' 'g++ g++ -dumpfullversion' \
         'make make --version' 'cmake cmake --version' 'meson meson --version' \
         'ninja ninja --version' ;;
  esac
}

# The customize hook that runs every probe in the root ($1 of the hook) and writes the labels
# to the file debian_image reads after mmdebstrap. A tool that does not answer is "missing".
version_hook() { # flavour labels-file -> the hook's shell text
  local n c out="" line
  while read -r n c; do
    line="v=\$(chroot \"\$1\" env HOME=/tmp sh -c '$c' 2>&1 </dev/null | grep -Eo '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n1); "
    line+="t=\"\${t:+\$t, }$n \${v:-missing}\"; "
    out+=$line
  done < <(probes "$1")
  echo "t=''; ${out}printf 'LABEL autopatch.toolchain=\"%s\"\\n' \"\$t\" >>'$2'"
}

tag_of() { # flavour -> NAME-HASH
  local hash
  hash=$( { echo "$suite"; echo "$1"; list_pkgs "$1"; cat "$here/build.sh" "$here/../debian-image.sh"; cat "$here/flavors/$1.hook" 2>/dev/null || true; } | sha256sum | cut -c1-16)
  echo "$1-$hash"
}

build_one() {
  local flavor=$1 tag hash labels rc=0
  local -a pkgs hooks=() changes
  [[ -f $here/flavors/$flavor.txt ]] || {
    echo "[sandbox-image] unknown flavour \"$flavor\"; known: $(flavors | tr '\n' ' ')" >&2
    return 2
  }
  tag=$(tag_of "$flavor")
  hash=${tag#"$flavor"-}
  mapfile -t pkgs < <(list_pkgs "$flavor")
  if docker image inspect "$name:$tag" >/dev/null 2>&1 ||
    { docker image inspect "$cache:$tag" >/dev/null 2>&1 && docker tag "$cache:$tag" "$name:$tag"; }; then
    docker tag "$name:$tag" "$name:$flavor"
    [[ $flavor == "$default_flavor" ]] && docker tag "$name:$tag" "$name:latest"
    echo "[sandbox-image] $name:$tag is up to date" >&2
    return 0
  fi
  echo "[sandbox-image] building $name:$tag (${#pkgs[@]} packages from Debian $suite)" >&2
  # A non-root user 10001 owns nothing; /tmp and the workspace are tmpfs mounts at run time.
  changes=('USER 10001:10001' 'WORKDIR /tmp/workspace'
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    'ENV HOME=/tmp/workspace' 'ENV LANG=C.UTF-8' 'CMD ["sleep", "infinity"]'
    "LABEL autopatch.image-hash=$hash" "LABEL autopatch.flavor=$flavor"
    "LABEL autopatch.suite=$suite")
  [[ -f $here/flavors/$flavor.hook ]] && hooks+=("$(cat "$here/flavors/$flavor.hook")")
  labels=$(mktemp)
  hooks+=("$(version_hook "$flavor" "$labels")")
  debian_image "$suite" "$name:$tag" sandbox /tmp/workspace /bin/sh pkgs hooks changes "$labels" ||
    rc=$?
  [[ -s $labels ]] && echo "[sandbox-image] $flavor: $(sed 's/^LABEL autopatch.toolchain=//' "$labels")" >&2
  rm -f "$labels"
  ((rc == 0)) || return "$rc"
  docker tag "$name:$tag" "$name:$flavor"
  [[ $name == "$cache" ]] || docker tag "$name:$tag" "$cache:$tag"
  [[ $flavor == "$default_flavor" ]] && docker tag "$name:$tag" "$name:latest"
  echo "[sandbox-image] built $name:$tag" >&2
}

want=("$default_flavor")
print_tag=0
while (($#)); do
  case $1 in
    --flavor) [[ $# -ge 2 ]] || { echo "build.sh: --flavor needs a name" >&2; exit 2; }
              want=("$2"); shift 2 ;;
    --all) mapfile -t want < <(flavors); shift ;;
    --print-tag) print_tag=1; shift ;;
    --list) flavors; exit 0 ;;
    *) echo "build.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for f in "${want[@]}"; do
  if ((print_tag)); then
    [[ -f $here/flavors/$f.txt ]] || { echo "build.sh: unknown flavour \"$f\"" >&2; exit 2; }
    echo "$name:$(tag_of "$f")"
  else
    build_one "$f"
  fi
done
