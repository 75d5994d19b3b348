#!/usr/bin/env bash
# Sanitizer and fuzzing runs (CI runs this after tests/scripts/test.sh), with Debian's clang-15:
#   1. AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan) of the library, the
#      reference, the CPU tests and the libFuzzer harness; every error fatal. Runs the ctest
#      labels unit and plugin (every CPU test but the 2^32 sweeps, which test.sh runs unsanitized).
#   2. The fuzzer over the C ABI: the seed corpus and regression inputs, then a bounded run of one
#      process a core (FUZZ_JOBS, default nproc) for 60 core-seconds in all (FUZZ_SECONDS each,
#      default 60 / FUZZ_JOBS, at least 10; tests/scripts/fuzz.sh).
#   3. ThreadSanitizer build (build-tsan, g++) of the library and the concurrency test, which runs
#      many threads calling every operation at once.
# Usage: bash tests/scripts/sanitize.sh [asan] [fuzz] [tsan] [build]   (default: asan fuzz tsan;
# build: only the ASan + UBSan build, which tests/scripts/fuzz.sh also uses)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/steps.sh
bash tests/scripts/install_deps.sh --no-python >/dev/null

cxx=/usr/lib/llvm-15/bin/clang++
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(asan fuzz tsan)
want() { for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
# CPU only: the GPU plugins are compiled (and sanitized on a GPU) by tests/scripts/gpu.sh.
# RelWithDebInfo's -O2 without its -g: the root CMakeLists.txt gives sanitizer builds line tables.
common=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"
        -DFUSEDNORM_CUDA=OFF -DFUSEDNORM_HIP=OFF -DFUSEDNORM_BUILD_BENCH=OFF)
build_asan() {
  cmake -S . -B build-asan "${common[@]}" -DCMAKE_CXX_COMPILER=$cxx -DFUSEDNORM_SANITIZE=address,undefined \
    -DFUSEDNORM_FUZZ=ON >/dev/null && cmake --build build-asan  # &&: step's `||` turns off set -e
}
build_tsan() {
  cmake -S . -B build-tsan "${common[@]}" -DCMAKE_CXX_COMPILER=g++ -DFUSEDNORM_SANITIZE=thread >/dev/null &&
    cmake --build build-tsan --target test_concurrency
}
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if want asan || want fuzz || want build; then
  step "asan+ubsan: configure and build (clang-15)" build_asan
fi
if want asan; then
  step "asan+ubsan: ctest -L 'unit|plugin' (-j2)" \
    ctest --test-dir build-asan --output-on-failure -L 'unit|plugin' -j2
fi
if want fuzz; then
  # One fuzzing process a core: two for 30 s each here (as many executions as one for 60 s).
  export FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}
  export FUZZ_SECONDS=${FUZZ_SECONDS:-$((60 / FUZZ_JOBS > 10 ? 60 / FUZZ_JOBS : 10))}
  step "fuzz: C ABI, corpus + ${FUZZ_JOBS} x ${FUZZ_SECONDS} s (asan+ubsan)" bash tests/scripts/fuzz.sh
fi
if want tsan; then
  # g++: its TSan runtime is a shared library, so libfusednorm.so links as usual. Debian's oneTBB is
  # not instrumented: under TSan the test caps oneTBB at one thread, so each calling thread runs its
  # own tasks and every race between the callers is visible with no suppression
  # (tests/api/concurrency_test.cc; tests/sanitizers/tsan.supp is for runs with TBB workers).
  step "tsan: configure and build (g++)" build_tsan
  step "tsan: test_concurrency (12 threads x every operation)" \
    env TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" ./build-tsan/tests/test_concurrency
fi
