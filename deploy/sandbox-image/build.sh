#!/usr/bin/env bash
# deploy/sandbox-image/build.sh - build the autopatch-sandbox image from Debian packages with
# mmdebstrap + `docker import`, tagged by a content hash of its inputs. If an image with that
# tag already exists the build is skipped, so reruns take a second.
#
# Usage: build.sh [--print-tag]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=${AUTOPATCH_SANDBOX_SUITE:-bookworm}
name=autopatch-sandbox

mapfile -t pkgs < <(grep -v '^\s*#' "$here/packages.txt" | sed '/^\s*$/d')
hash=$( { echo "$suite"; printf '%s\n' "${pkgs[@]}"; cat "$here/build.sh"; } | sha256sum | cut -c1-16)
tag="$name:$hash"
if [[ ${1:-} == --print-tag ]]; then echo "$tag"; exit 0; fi

if docker image inspect "$tag" >/dev/null 2>&1; then
  docker tag "$tag" "$name:latest"
  echo "[sandbox-image] $tag is up to date" >&2
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "[sandbox-image] building $tag (${#pkgs[@]} packages from Debian $suite)" >&2
# A non-root user 10001 owns nothing; /tmp and the workspace are tmpfs mounts at run time.
mmdebstrap --variant=apt --quiet \
  --include="$(IFS=,; echo "${pkgs[*]}")" \
  --customize-hook='chroot "$1" groupadd -g 10001 sandbox' \
  --customize-hook='chroot "$1" useradd -u 10001 -g 10001 -d /tmp/workspace -M -s /bin/sh sandbox' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  "$suite" "$tmp/rootfs.tar"
docker import \
  --change 'USER 10001:10001' \
  --change 'WORKDIR /tmp/workspace' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV HOME=/tmp/workspace' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["sleep", "infinity"]' \
  --change "LABEL autopatch.image-hash=$hash" \
  "$tmp/rootfs.tar" "$tag" >/dev/null
docker tag "$tag" "$name:latest"
echo "[sandbox-image] built $tag" >&2
