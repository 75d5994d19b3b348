#!/usr/bin/env bash
# The test command (README): install dependencies, build, run every ctest test, the 2^32
# exhaustive encoder test included. Pass ctest arguments through, e.g. `-LE exhaustive`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/scripts/install_deps.sh
# install_deps.sh installs Debian's HIP toolchain on amd64: there the HIP plugin must build.
hip=AUTO
if [ "$(dpkg --print-architecture)" = amd64 ]; then hip=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PWD/build/venv/bin/python" \
  -DFUSEDNORM_HIP="${FUSEDNORM_HIP:-$hip}"
cmake --build build
ctest --test-dir build --output-on-failure "$@"
