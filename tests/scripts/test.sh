#!/usr/bin/env bash
# The test command (README): install dependencies, build, run every ctest test, the 2^32
# exhaustive encoder sweep included, and print the time of each step.
#   bash tests/scripts/test.sh                  # GPU plugins for one architecture per compiler
#   FUSEDNORM_ALL_ARCHS=1 bash tests/scripts/test.sh   # every architecture of a release build
#   bash tests/scripts/test.sh -LE exhaustive   # ctest arguments: one ctest run with them
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/steps.sh
step "dependencies (apt-get, Python venv)" bash tests/scripts/install_deps.sh
# install_deps.sh installs Debian's HIP toolchain on amd64: there the HIP plugin must build.
hip=AUTO
if [ "$(dpkg --print-architecture)" = amd64 ]; then hip=ON; fi
ci_archs=ON
[ "${FUSEDNORM_ALL_ARCHS:-0}" = 1 ] && ci_archs=OFF
step "configure" cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$PWD/build/venv/bin/python" -DFUSEDNORM_HIP="${FUSEDNORM_HIP:-$hip}" \
  -DFUSEDNORM_CI_ARCHS=$ci_archs $(ccache_args)
step "build (library, CPU backend, CUDA and HIP plugins, tests, bench)" cmake --build build
if [ $# -gt 0 ]; then
  step "ctest $*" ctest --test-dir build --output-on-failure "$@"
else
  # Both cores: the exhaustive sweep spreads over them itself, the other tests run two at a time.
  step "ctest: every test but the 2^32 sweep (-j2)" ctest --test-dir build --output-on-failure -LE exhaustive -j2
  # The Python package (docs/python.md): pip install ./python into build-python/venv, pytest. It
  # runs one process at a time (pip, then pytest: one core busy), so it runs beside the sweep,
  # whose threads take whatever the cores leave; its output follows the sweep's.
  mkdir -p build-python
  step "python package (pip install ./python, pytest; beside the sweep)" bash tests/scripts/python.sh \
    >build-python/python.log 2>&1 &
  py=$!
  rc=0
  step "ctest: exhaustive 2^32 encoder sweep, every SIMD target" ctest --test-dir build --output-on-failure -L exhaustive || rc=$?
  py_rc=0
  wait $py || py_rc=$?
  echo "==== python package (build-python/python.log)"
  cat build-python/python.log
  [ $rc -eq 0 ] || exit $rc
  exit $py_rc
fi
