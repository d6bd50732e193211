#!/usr/bin/env bash
# scripts/test.sh - set up (via bootstrap.sh), build with -Werror, and run every suite:
# style and layout, unit and integration tests (plain and under ASan+UBSan), a short fuzzing
# pass of every target side by side (scripts/fuzz.sh; the long runs are that script's own),
# the black-box end-to-end tests (pytest, on every core: pytest-xdist) against the real
# binary, Docker engine, git server and stand-ins, and the browser tests of the console
# (headless Chromium). docs/testing.md says what each phase covers and how long it takes.
#
# Ends with a table of the phases (seconds, tests) and one line "N passed, N failed" summing
# all suites (a skipped test counts as failed); exits non-zero if any failed.
#
# Usage: scripts/test.sh [pytest args...]   (extra args narrow the end-to-end run, e.g. -k webhook)
# Settings: AP_FUZZ_SECONDS (each target's run here, default 5), AP_TEST_JOBS (pytest
# workers, default: the number of cores).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
results="$root/build-results"
rm -rf "$results"; mkdir -p "$results"
jobs=${AP_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
fail_setup=0

# phase NAME RESULTS...: the time since the previous phase ended is NAME's; RESULTS are the
# files under $results whose tests it ran (scripts/summarize.py counts them for the table).
phase_t0=$SECONDS
phase() {
  local name=$1; shift
  printf '%s\t%s\t%s\n' "$name" "$((SECONDS - phase_t0))" "$*" >>"$results/phases.tsv"
  phase_t0=$SECONDS
}
step() { printf '\n=== %s ===\n' "$*"; }

step "set-up (scripts/bootstrap.sh)"
scripts/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed"; exit 1; }
phase "set-up"

setup() { # dir, meson args...
  local dir=$1; shift
  if [[ -f $dir/build.ninja ]]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

# The sandbox flavours are built while the C phases run: a build is mostly downloading and
# unpacking Debian packages, so on a fresh machine (5-6 builds of about a minute) most of it
# hides behind the compile, the unit tests and the fuzzing.
# Every flavour a test runs a box of: python (the default, also built by bootstrap.sh) and node
# in tests/e2e/test_environments.py, test_proof.py and test_doctor.py, c for the Makefile
# projects of test_proof.py and the CMake fixture of test_runners.py, go and rust for the Go and
# Rust fixtures of test_runners.py, java for the Maven projects of test_toolchains.py (whose
# first-use test builds go and node again under a flavour repository of its own; build.sh finds
# the content-hash tag and only re-tags). Each build is skipped when its content-hash tag
# exists, so this is a no-op on a machine that has them; a first build takes about a minute
# on a quiet machine, 3-7 minutes on a loaded one (mmdebstrap, Debian 13).
build_flavours() {
  local flavor
  for flavor in python node c go rust java; do
    deploy/sandbox-image/build.sh --flavor "$flavor" || echo "$flavor" >>"$results/flavours.failed"
  done
}
build_flavours >"$results/flavours.log" 2>&1 &
flavours_pid=$!

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
phase "style and layout" checks.json

step "build (-Wall -Wextra -Werror)"
if setup build -Dwerror=true && ninja -C build; then
  step "unit and integration tests"
  meson test -C build --suite unit --suite integration --print-errorlogs --num-processes "$jobs" || true
  cp build/meson-logs/testlog.json "$results/unit.json" 2>/dev/null || fail_setup=$((fail_setup + 1))
else
  fail_setup=$((fail_setup + 1))
fi
phase "build, unit and integration" unit.json

step "unit tests under ASan+UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false &&
   ninja -C build-asan; then
  meson test -C build-asan --suite unit --suite integration --print-errorlogs --num-processes "$jobs" || true
  cp build-asan/meson-logs/testlog.json "$results/unit-asan.json" 2>/dev/null ||
    fail_setup=$((fail_setup + 1))
else
  fail_setup=$((fail_setup + 1))
fi
unset ASAN_OPTIONS UBSAN_OPTIONS
phase "ASan+UBSan build and tests" unit-asan.json

step "fuzzing (libFuzzer, ${AP_FUZZ_SECONDS:-5} s a target, $jobs at once)"
# Each target replays its earlier crashes (tests/fuzz/regressions/) and fuzzes from its
# seeds briefly; scripts/fuzz.sh without --seconds is the long run (docs/testing.md).
scripts/fuzz.sh --seconds "${AP_FUZZ_SECONDS:-5}" --jobs "$jobs" --results "$results/fuzz" || true
[[ -s $results/fuzz/fuzz.json ]] || fail_setup=$((fail_setup + 1))
phase "fuzzing" fuzz/fuzz.json

step "sandbox flavours the end-to-end tests run in"
# Started in the background after set-up (below); here the run waits for what is left.
wait "$flavours_pid" || true
cat "$results/flavours.log"
if [[ -s $results/flavours.failed ]]; then
  fail_setup=$((fail_setup + $(wc -l <"$results/flavours.failed")))
fi
phase "sandbox flavours"

# pytest's exit 5 (nothing collected) and a missing report are failures, not silent passes.
run_pytest() { # suite name, timeout, pytest args...
  local suite=$1 limit=$2; shift 2
  AP_BUILD_DIR="$root/build" timeout "$limit" /usr/bin/python3 -m pytest "$@" -rA \
    -p no:cacheprovider --junitxml="$results/$suite.xml"
  local rc=$?
  if ((rc == 5)) || [[ ! -s $results/$suite.xml ]]; then fail_setup=$((fail_setup + 1)); fi
}

step "end-to-end tests (pytest, $jobs workers)"
# Each test owns its ports, owner id, data directory and containers (docs/testing.md), so
# the workers share one Docker engine; --durations lists the slowest for the next change.
if [[ -x build/autopatch ]]; then
  xdist=(); ((jobs > 1)) && xdist=(-n "$jobs")
  run_pytest e2e 3600 tests/e2e "${xdist[@]}" --durations=25 "$@"
else
  fail_setup=$((fail_setup + 1))
fi
phase "end-to-end" e2e.xml

step "browser tests (headless Chromium)"
# The console, registration and sign-in in Debian's chromium driven by playwright-core
# (tests/browser/); screenshots are kept in build-results/browser/.
if [[ -x build/autopatch ]]; then
  AP_SCREENSHOTS="$results/browser" run_pytest browser 1800 tests/browser
else
  fail_setup=$((fail_setup + 1))
fi
phase "browser" browser.xml

step "summary"
/usr/bin/python3 scripts/summarize.py "$results" "$fail_setup"
