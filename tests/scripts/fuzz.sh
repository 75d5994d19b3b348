#!/usr/bin/env bash
# Fuzzes the C ABI with libFuzzer (tests/fuzz/fuzz_c_abi.cc) in the ASan + UBSan build of
# tests/scripts/sanitize.sh (${FUZZ_BUILD_DIR:-build-asan}/, Debian's clang-15; made by
# `sanitize.sh build` when it does not exist yet).
#   1. runs every file of tests/fuzz/regressions/ (inputs that once found a bug) once;
#   2. fuzzes for ${FUZZ_SECONDS:-60} s, starting from a COPY of tests/fuzz/corpus/ (the repo's
#      corpus is never modified; new inputs stay in $FUZZ_WORK, default build-asan/fuzz-work).
# Exits non-zero on any crash, sanitizer report or broken invariant; the input that did it is
# saved as $FUZZ_WORK/run-<date>/crash-* (or timeout-*, oom-*, leak-*).
#
# Environment: FUZZ_SECONDS (60), FUZZ_JOBS (1: one process; N: -jobs=N -workers=N), FUZZ_WORK,
# FUZZ_BUILD_DIR, FUZZ_STRICT_OVERLAP=1 (also compare results of valid calls
# whose tensors overlap), FUZZ_THREADS (oneTBB threads of the library, 1), FUZZ_NO_TARGETS=1
# (do not switch the Highway target per input).
#
# Long run (one hour, one core; the work corpus grows between runs):
#   FUZZ_SECONDS=3600 bash tests/scripts/fuzz.sh
# Reproduce a crash (prints the call that broke an invariant, then the sanitizer's report):
#   build-asan/tests/fuzz/fuzz_c_abi build-asan/fuzz-work/run-<date>/crash-<sha1>
# Keep it as a regression input (run by step 1 from then on):
#   cp build-asan/fuzz-work/run-<date>/crash-<sha1> tests/fuzz/regressions/<what-it-found>
# Minimize it first if you like:
#   build-asan/tests/fuzz/fuzz_c_abi -minimize_crash=1 -runs=10000 build-asan/fuzz-work/run-<date>/crash-<sha1>
# Regenerate the seed corpus (tests/fuzz/seeds.inc):
#   rm -f tests/fuzz/corpus/* && FUZZ_WRITE_SEEDS=tests/fuzz/corpus build-asan/tests/fuzz/fuzz_c_abi
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$ROOT/${FUZZ_BUILD_DIR:-build-asan}
FUZZER=$BUILD/tests/fuzz/fuzz_c_abi
SECONDS_TO_RUN=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-1}
WORK=${FUZZ_WORK:-$BUILD/fuzz-work}

if [ ! -f "$BUILD/build.ninja" ]; then
  [ -z "${FUZZ_BUILD_DIR:-}" ] || { echo "fuzz.sh: $BUILD is not a build directory" >&2; exit 2; }
  bash tests/scripts/sanitize.sh build
fi
ninja -j2 -C "$BUILD" fuzz_c_abi

# Leaks are reported (detect_leaks); every UBSan report is already fatal (-fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

ART=$WORK/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$WORK/corpus" "$ART"
cd "$ART"

shopt -s nullglob
regressions=("$ROOT"/tests/fuzz/regressions/*)
if [ ${#regressions[@]} -gt 0 ]; then
  echo "==== fuzz: ${#regressions[@]} regression input(s)"
  "$FUZZER" "${regressions[@]}"
fi

cp -n "$ROOT"/tests/fuzz/corpus/* "$WORK/corpus/"
echo "==== fuzz: ${SECONDS_TO_RUN} s, jobs ${JOBS}, corpus $WORK/corpus ($(ls "$WORK/corpus" | wc -l) files)"
args=(-max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$ART/")
rc=0
if [ "$JOBS" -gt 1 ]; then
  "$FUZZER" "${args[@]}" -jobs="$JOBS" -workers="$JOBS" "$WORK/corpus" || rc=$?
  cat fuzz-*.log >"$ART/run.log" 2>/dev/null || true
else
  "$FUZZER" "${args[@]}" "$WORK/corpus" 2>&1 | tee "$ART/run.log" || rc=${PIPESTATUS[0]}
fi
execs=$(grep -h 'stat::number_of_executed_units' "$ART/run.log" | awk '{ s += $2 } END { print s + 0 }')
rate=$(grep -h 'stat::average_exec_per_sec' "$ART/run.log" | awk '{ s += $2 } END { print s + 0 }')
echo "==== fuzz: executed ${execs} inputs (${rate} exec/s), corpus now $(ls "$WORK/corpus" | wc -l) files"
crashes=("$ART"/crash-* "$ART"/timeout-* "$ART"/oom-* "$ART"/leak-*)
if [ "$rc" -ne 0 ] || [ ${#crashes[@]} -gt 0 ]; then
  echo "==== fuzz: FAILED (rc $rc): ${crashes[*]:-see the log above}" >&2
  exit 1
fi
echo "==== fuzz: OK"
