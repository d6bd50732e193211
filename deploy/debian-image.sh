# shellcheck shell=bash
# deploy/debian-image.sh - sourced by the image builders (deploy/sandbox-image/build.sh,
# deploy/autopatch-image/build.sh): a root filesystem from Debian packages with mmdebstrap,
# a user 10001 of its own, and `docker import` with the builder's image settings. No registry,
# no Dockerfile. Both builders hash this file into their content-hash tags.

# debian_image SUITE IMAGE:TAG USER HOME SHELL PKGS HOOKS CHANGES [LATE_CHANGES_FILE]
#   USER, HOME, SHELL: the account 10001:10001 (its home is not created);
#   PKGS, HOOKS, CHANGES: names of arrays with the packages, extra mmdebstrap customize hooks
#   (run after the account exists), and `docker import --change` lines.
#   LATE_CHANGES_FILE: a file the hooks may write more `--change` lines to, one a line (labels
#   read inside the built root, such as toolchain versions); read after mmdebstrap.
# `passwd` is always included: it has groupadd/useradd, and since Debian 13 no essential package
# pulls it in any more (`login` moved to util-linux), so the account step failed on trixie.
# Returns mmdebstrap's or docker's failure; the scratch directory is removed either way.
debian_image() {
  local suite=$1 tag=$2 user=$3 home=$4 shell=$5 di_tmp rc=0 h c late=${9:-}
  local -n di_pkgs=$6 di_hooks=$7 di_changes=$8
  local -a di_args=(--customize-hook="chroot \"\$1\" groupadd -g 10001 $user"
    --customize-hook="chroot \"\$1\" useradd -u 10001 -g 10001 -d $home -M -s $shell $user")
  for h in "${di_hooks[@]}"; do di_args+=(--customize-hook="$h"); done
  di_args+=(--customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*')
  local -a di_change_args=()
  for c in "${di_changes[@]}"; do di_change_args+=(--change "$c"); done
  di_tmp=$(mktemp -d)
  mmdebstrap --variant=apt --quiet --include="$(IFS=,; echo "passwd,${di_pkgs[*]}")" \
    "${di_args[@]}" "$suite" "$di_tmp/rootfs.tar" || rc=$?
  if ((rc == 0)) && [[ -n $late && -s $late ]]; then
    while IFS= read -r c; do [[ -n $c ]] && di_change_args+=(--change "$c"); done <"$late"
  fi
  ((rc == 0)) && { docker import "${di_change_args[@]}" "$di_tmp/rootfs.tar" "$tag" >/dev/null || rc=$?; }
  rm -rf "$di_tmp"
  return "$rc"
}
