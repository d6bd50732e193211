#!/usr/bin/env bash
# deploy/sandbox-image/build.sh - build autopatch's sandbox images from Debian packages with
# mmdebstrap + `docker import`, one per toolchain flavour, each tagged by a content hash of its
# inputs (suite, base.txt, flavors/NAME.txt, this script). A flavour whose hash tag exists is
# skipped, so reruns take a second.
#
# Images: autopatch-sandbox:NAME and autopatch-sandbox:NAME-HASH for every flavour; the default
# flavour (python) is also autopatch-sandbox:latest, the default AUTOPATCH_SANDBOX_IMAGE.
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
suite=${AUTOPATCH_SANDBOX_SUITE:-bookworm}
name=autopatch-sandbox
default_flavor=python

flavors() { for f in "$here"/flavors/*.txt; do basename "$f" .txt; done; }

list_pkgs() { # flavour -> its packages (base + flavour), sorted, unique
  cat "$here/base.txt" "$here/flavors/$1.txt" | grep -v '^\s*#' | sed '/^\s*$/d' | sort -u
}

tag_of() { # flavour -> NAME-HASH
  local hash
  hash=$( { echo "$suite"; echo "$1"; list_pkgs "$1"; cat "$here/build.sh" "$here/../debian-image.sh"; } | sha256sum | cut -c1-16)
  echo "$1-$hash"
}

build_one() {
  local flavor=$1 tag hash
  local -a pkgs hooks=() changes
  [[ -f $here/flavors/$flavor.txt ]] || {
    echo "[sandbox-image] unknown flavour \"$flavor\"; known: $(flavors | tr '\n' ' ')" >&2
    return 2
  }
  tag=$(tag_of "$flavor")
  hash=${tag#"$flavor"-}
  mapfile -t pkgs < <(list_pkgs "$flavor")
  if docker image inspect "$name:$tag" >/dev/null 2>&1; then
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
    "LABEL autopatch.image-hash=$hash" "LABEL autopatch.flavor=$flavor")
  debian_image "$suite" "$name:$tag" sandbox /tmp/workspace /bin/sh pkgs hooks changes
  docker tag "$name:$tag" "$name:$flavor"
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
