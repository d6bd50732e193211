#!/usr/bin/env bash
# scripts/fuzz.sh - build the libFuzzer targets (tests/fuzz/) and run them side by side.
#
# Usage: scripts/fuzz.sh [--seconds N] [--jobs N] [--results DIR] [TARGET...]
#   --seconds N   how long each target runs (default 600: the long, e.g. nightly, run;
#                 scripts/test.sh runs every target for AP_FUZZ_SECONDS, default 5)
#   --jobs N      how many targets run at once (default: the number of cores)
#   --results DIR where logs, fuzz.json (one {"name","result"} line a target, read by
#                 scripts/summarize.py) and crash artifacts go (default build-results/fuzz)
#   TARGET...     fuzz_NAME targets to run (default: every one)
#
# Every target starts from its seeds (tests/fuzz/seeds/NAME/, else the shared seeds), the
# inputs of earlier crashes (tests/fuzz/regressions/NAME/, replayed first, so a crash once
# found is a regression test for ever) and a working corpus that grows across runs on this
# machine (build-fuzz-corpus/NAME/, not committed). A crash, leak or timeout fails the target
# and its input is copied into tests/fuzz/regressions/NAME/: commit it with the fix.
# Exit status 1 if any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=600
jobs=$(nproc 2>/dev/null || echo 2)
results="$root/build-results/fuzz"
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
mkdir -p "$results"
: >"$results/fuzz.json"

setup() { # the fuzz build (clang, coverage, ASan+UBSan; see tests/fuzz/meson.build)
  if [[ -f build-fuzz/build.ninja ]]; then
    meson configure build-fuzz -Dfuzz=true >/dev/null
  else
    CC=clang meson setup build-fuzz -Dfuzz=true -Db_lundef=false >/dev/null
  fi
}
if ! setup || ! ninja -C build-fuzz >"$results/build.log" 2>&1; then
  tail -n 40 "$results/build.log"
  echo '{"name": "fuzz build", "result": "FAIL"}' >>"$results/fuzz.json"
  exit 1
fi

if ((${#targets[@]} == 0)); then
  for f in build-fuzz/tests/fuzz/fuzz_*; do
    [[ -f $f && -x $f ]] && targets+=("$(basename "$f")")   # not meson's fuzz_*.p folders
  done
fi

seeds_for() { # a target's own seeds, else the shared ones
  if [[ -d tests/fuzz/seeds/$1 ]]; then echo "tests/fuzz/seeds/$1"
  else echo tests/fuzz/seeds; fi
}

# One target: run it, record the result, keep what it crashed on. Runs in a subshell.
run_one() {
  local name=$1 bin="build-fuzz/tests/fuzz/$1" regress="tests/fuzz/regressions/$1"
  local corpus="$root/build-fuzz-corpus/$name" art="$results/$name-artifacts"
  if [[ ! -x $bin ]]; then
    echo "{\"name\": \"$name\", \"result\": \"FAIL\"}" >>"$results/fuzz.json"
    echo "$name: no such target ($bin)"
    return
  fi
  mkdir -p "$corpus" "$art"
  # Regressions first, on their own: a known crash must fail fast and say which input.
  local ok=1 known=()
  [[ -d $regress ]] && known=("$regress")
  if ((${#known[@]})) &&
     ! "$bin" -runs=0 -rss_limit_mb=2048 -artifact_prefix="$art/" "$regress" \
       >"$results/$name.regressions.log" 2>&1; then
    ok=0
    echo "$name: an input in $regress crashes it again:"
    tail -n 30 "$results/$name.regressions.log"
  fi
  if ((ok)) && ! "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 \
       -artifact_prefix="$art/" -print_final_stats=1 \
       "$corpus" "$(seeds_for "$name")" "${known[@]+"${known[@]}"}" >"$results/$name.log" 2>&1; then
    ok=0
    local a
    for a in "$art"/*; do
      [[ -f $a ]] || continue
      mkdir -p "$regress" && cp "$a" "$regress/$(basename "$a")"
      echo "$name: kept $(basename "$a") in $regress (commit it with the fix)"
    done
    tail -n 40 "$results/$name.log"
  fi
  if ((ok)); then
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$results/$name.log")
    echo "{\"name\": \"$name\", \"result\": \"OK\"}" >>"$results/fuzz.json"
    echo "$name: no crash in $seconds s (${execs:-?} inputs)"
  else
    echo "{\"name\": \"$name\", \"result\": \"FAIL\"}" >>"$results/fuzz.json"
  fi
}

# At most $jobs targets at once; each line of fuzz.json is one short append, so the
# concurrent writers do not interleave within a line.
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n; running=$((running - 1)); fi
done
wait

! grep -q '"FAIL"' "$results/fuzz.json"
