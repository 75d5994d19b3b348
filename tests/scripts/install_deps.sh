#!/usr/bin/env bash
# Installs what building and testing fusednorm needs on Debian 12: Debian packages (as root, or
# through sudo) and, for the Python oracle test, a virtual environment with numpy, ml_dtypes and
# pytest from PyPI at ${FUSEDNORM_VENV:-build/venv}. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(cmake ninja-build g++ libhwy-dev libtbb-dev catch2 libdlpack-dev python3 python3-venv python3-pip)
# fusednorm-bench: option parsing (CLI11) and --json (nlohmann-json); the C header's API reference: doxygen.
packages+=(libcli11-dev nlohmann-json3-dev doxygen)
# The Python package (tests/scripts/python.sh: pip install ./python builds a C++ extension): Python.h.
packages+=(python3-dev)
# test.sh and python.sh compile the library twice with the same commands: ccache serves the second.
packages+=(ccache)
# The install test compiles a C program with `pkg-config --cflags --libs fusednorm`.
packages+=(gcc pkg-config)
# tests/scripts/sanitize.sh: clang-15 with its sanitizer and libFuzzer runtimes (libclang-common-15-dev).
packages+=(clang-15 libclang-common-15-dev)
# The HIP plugin (docs/building.md): Debian's HIP 5.2 on clang-15 (amd64 only), and clang-19 with
# lld-19 and llvm-19 (llvm-dis, llvm-as) for the gfx942 compile-only check. ~700 MB.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  packages+=(hipcc libamdhip64-dev rocm-device-libs clang-19 lld-19 llvm-19)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
  # The downloaded .deb files (about 1 GB with the HIP toolchain) are not needed once installed.
  $sudo apt-get clean
fi

if [ "${1:-}" != "--no-python" ]; then
  venv="${FUSEDNORM_VENV:-build/venv}"
  if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -c "import numpy, ml_dtypes, pytest" 2>/dev/null ||
    "$venv/bin/python" -m pip install --quiet --no-cache-dir numpy ml_dtypes pytest
fi
