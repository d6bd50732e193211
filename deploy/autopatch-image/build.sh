#!/usr/bin/env bash
# deploy/autopatch-image/build.sh - the autopatch container image, from Debian packages with
# mmdebstrap + `docker import` like the sandbox image: no registry, no Dockerfile. The binary
# (and the egress proxy) come from a meson build of this checkout on the same Debian suite, so
# the image's libraries are the ones it was linked against.
#
# Image: autopatch:latest and autopatch:HASH (a content hash of packages.txt, this script and
# the binaries). Runs as uid 10001, `autopatch serve` by default; /var/lib/autopatch is where
# AUTOPATCH_DATA_DIR should point (an emptyDir or a volume in deploy/kubernetes/).
#
# Usage: build.sh [BUILD_DIR]     (default: ./build; `ninja -C BUILD_DIR` must have run)
#        build.sh --print-tag [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../debian-image.sh
source "$here/../debian-image.sh"
root=$(cd "$here/../.." && pwd)
suite=${AUTOPATCH_IMAGE_SUITE:-bookworm}
print_tag=0
if [[ ${1:-} == --print-tag ]]; then print_tag=1; shift; fi
build=${1:-$root/build}
bin=$build/autopatch
proxy=$build/sandbox/autopatch-egress-proxy
for f in "$bin" "$proxy"; do
  [[ -x $f ]] || { echo "[autopatch-image] $f is missing: run meson setup + ninja first" >&2; exit 2; }
done
mapfile -t pkgs < <(grep -v '^\s*#' "$here/packages.txt" | sed '/^\s*$/d' | sort -u)
hash=$( { echo "$suite"; printf '%s\n' "${pkgs[@]}"; cat "$here/build.sh" "$here/../debian-image.sh"; sha256sum "$bin" "$proxy" | cut -d' ' -f1; } | sha256sum | cut -c1-16)
if ((print_tag)); then echo "autopatch:$hash"; exit 0; fi
if docker image inspect "autopatch:$hash" >/dev/null 2>&1; then
  docker tag "autopatch:$hash" autopatch:latest
  echo "[autopatch-image] autopatch:$hash is up to date" >&2
  exit 0
fi
echo "[autopatch-image] building autopatch:$hash (${#pkgs[@]} packages from Debian $suite)" >&2
hooks=('mkdir -p "$1"/var/lib/autopatch && chown 10001:10001 "$1"/var/lib/autopatch'
  "copy-in $bin $proxy /usr/local/bin")
changes=('USER 10001:10001' 'WORKDIR /var/lib/autopatch' 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
  'ENV AUTOPATCH_DATA_DIR=/var/lib/autopatch' 'ENV AUTOPATCH_ENV_FILE=/dev/null' 'EXPOSE 3000'
  'ENTRYPOINT ["/usr/local/bin/autopatch"]' 'CMD ["serve"]' "LABEL autopatch.image-hash=$hash")
debian_image "$suite" "autopatch:$hash" autopatch /var/lib/autopatch /usr/sbin/nologin pkgs hooks changes
docker tag "autopatch:$hash" autopatch:latest
echo "[autopatch-image] built autopatch:$hash" >&2
