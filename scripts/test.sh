#!/usr/bin/env bash
# scripts/test.sh - set up (via bootstrap.sh), build with -Werror, and run every suite:
# unit tests (plain and under ASan+UBSan), fuzzing (60 s a target), the black-box
# end-to-end tests (pytest) against the real binary, Docker engine, git server and stand-ins,
# and the browser tests of the console (headless Chromium).
# Ends with one line "N passed, N failed" summing all suites; exits non-zero if any failed.
#
# Usage: scripts/test.sh [pytest args...]   (extra args narrow the pytest run, e.g. -k webhook)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
results="$root/build-results"
rm -rf "$results"; mkdir -p "$results"

scripts/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed"; exit 1; }

step() { printf '\n=== %s ===\n' "$*"; }
fail_setup=0

setup() { # dir, meson args...
  local dir=$1; shift
  if [[ -f $dir/build.ninja ]]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

step "style (clang-format) and layout"
# Every C file is formatted (.clang-format), and the folder layering holds
# (docs/internals/layout.md). Each is one test in the summary.
if git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run --Werror >"$results/format.log" 2>&1; then
  echo '{"name": "clang-format", "result": "OK"}' >> "$results/checks.json"
  echo "clang-format: every C file is formatted"
else
  echo '{"name": "clang-format", "result": "FAIL"}' >> "$results/checks.json"
  head -n 40 "$results/format.log"
fi
if /usr/bin/python3 scripts/check_layout.py; then
  echo '{"name": "layout", "result": "OK"}' >> "$results/checks.json"
  echo "layout: no upward include, no cycle"
else
  echo '{"name": "layout", "result": "FAIL"}' >> "$results/checks.json"
fi

step "build (-Wall -Wextra -Werror)"
if setup build -Dwerror=true && ninja -C build; then
  step "unit and integration tests"
  meson test -C build --suite unit --suite integration --print-errorlogs --num-processes 2 || true
  cp build/meson-logs/testlog.json "$results/unit.json" 2>/dev/null || true
else
  fail_setup=$((fail_setup + 1))
fi

step "unit tests under ASan+UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false &&
   ninja -C build-asan; then
  meson test -C build-asan --suite unit --suite integration --print-errorlogs --num-processes 2 || true
  cp build-asan/meson-logs/testlog.json "$results/unit-asan.json" 2>/dev/null || true
else
  fail_setup=$((fail_setup + 1))
fi
unset ASAN_OPTIONS UBSAN_OPTIONS

step "fuzzing (libFuzzer, 60 s a target)"
seeds_for() { # a target's own seeds (tests/fuzz/seeds/NAME/), else the shared ones
  if [[ -d tests/fuzz/seeds/$1 ]]; then echo "tests/fuzz/seeds/$1"
  elif [[ -d tests/fuzz/seeds ]]; then echo tests/fuzz/seeds; fi
}
if CC=clang setup build-fuzz -Dfuzz=true -Db_lundef=false && ninja -C build-fuzz; then
  for f in build-fuzz/tests/fuzz/fuzz_*; do
    [[ -f $f && -x $f ]] || continue   # skip meson's fuzz_*.p object folders
    name=$(basename "$f")
    mkdir -p "$results/corpus-$name"
    if "$f" -max_total_time="${AP_FUZZ_SECONDS:-60}" -rss_limit_mb=2048 -artifact_prefix="$results/$name-" \
        "$results/corpus-$name" $(seeds_for "$name") \
        >"$results/$name.log" 2>&1; then
      echo "{\"name\": \"$name\", \"result\": \"OK\"}" >> "$results/fuzz.json"
      echo "$name: no crash in ${AP_FUZZ_SECONDS:-60} s"
    else
      echo "{\"name\": \"$name\", \"result\": \"FAIL\"}" >> "$results/fuzz.json"
      tail -n 40 "$results/$name.log"
    fi
  done
else
  fail_setup=$((fail_setup + 1))
fi

step "sandbox flavours the end-to-end tests run in"
# Every flavour a test runs a box of: python (the default, also built by bootstrap.sh) and node
# in tests/e2e/test_environments.py, test_proof.py and test_doctor.py, c for the Makefile
# projects of test_proof.py. Each build is skipped when its content-hash tag exists, so this is
# a no-op on a machine that has them; a first build takes a few minutes (mmdebstrap).
for flavor in python node c; do
  deploy/sandbox-image/build.sh --flavor "$flavor" || fail_setup=$((fail_setup + 1))
done

step "end-to-end tests (pytest)"
if [[ -x build/autopatch ]]; then
  AP_BUILD_DIR="$root/build" timeout 4500 /usr/bin/python3 -m pytest tests/e2e -rA -p no:cacheprovider \
    --junitxml="$results/e2e.xml" "$@"
  rc=$?
  # pytest exit 5 = nothing collected: count as a failure of the suite, not a silent pass.
  if ((rc == 5)); then fail_setup=$((fail_setup + 1)); fi
else
  fail_setup=$((fail_setup + 1))
fi

step "browser tests (headless Chromium)"
# The console, registration and sign-in in Debian's chromium driven by playwright-core
# (tests/browser/); screenshots are kept in build-results/browser/.
if [[ -x build/autopatch ]]; then
  AP_BUILD_DIR="$root/build" AP_SCREENSHOTS="$results/browser" timeout 1800 \
    /usr/bin/python3 -m pytest tests/browser -rA -p no:cacheprovider \
    --junitxml="$results/browser.xml"
  rc=$?
  if ((rc == 5)); then fail_setup=$((fail_setup + 1)); fi
else
  fail_setup=$((fail_setup + 1))
fi

step "summary"
/usr/bin/python3 scripts/summarize.py "$results" "$fail_setup"
