#!/usr/bin/env bash
# The main job (README): install dependencies, build, run fusednorm-bench on the CPU.
# Arguments go to fusednorm-bench (e.g. --json, --threads 1, --hidden 4096 --tokens 128).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/scripts/install_deps.sh --no-python
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target fusednorm-bench
./build/fusednorm-bench "$@"
