#!/usr/bin/env bash
# The Python package's test (docs/python.md): a virtual environment in build-python/venv, the
# test dependencies from PyPI (numpy, ml_dtypes, pytest, the build tools scikit-build-core and
# nanobind, and PyTorch with torch.compile unless FUSEDNORM_PY_TORCH=0), `pip install ./python`
# (which builds libfusednorm from this repository, CPU only), then pytest over python/tests.
# Prints pytest's summary line (then, when run on its own, the table of its steps' seconds);
# exits with pytest's status. Everything it writes stays under
# build-python/ (venv, CMake build directory, PyTorch's compile caches).
#   bash tests/scripts/python.sh                 # the whole suite
#   bash tests/scripts/python.sh -k cast         # pytest arguments
#   FUSEDNORM_PY_TORCH=0 bash tests/scripts/python.sh    # without PyTorch (its tests skip, saying why)
# Needs python3 with venv and its headers, cmake, ninja, g++, Highway, oneTBB and DLPack: as root
# (or with sudo) tests/scripts/install_deps.sh installs them when one is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/steps.sh

dir=${FUSEDNORM_PY_BUILD:-build-python}
venv="$dir/venv"
python=${PYTHON:-python3}
mkdir -p "$dir"

have_deps() {
  command -v cmake >/dev/null && command -v ninja >/dev/null && command -v g++ >/dev/null &&
    [ -e /usr/include/hwy/highway.h ] && [ -e /usr/include/dlpack/dlpack.h ] && [ -d /usr/include/oneapi/tbb ] &&
    "$python" -c 'import ensurepip, sysconfig, os, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null
}
if ! have_deps; then
  step "python: system packages (install_deps.sh)" bash tests/scripts/install_deps.sh --no-python
fi

packages=(numpy "ml_dtypes>=0.5" pytest "scikit-build-core>=0.10" "nanobind>=2.2")
pip() { "$venv/bin/python" -m pip "$@"; }
setup() {
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  pip install --quiet --no-cache-dir "${packages[@]}"
  [ "${FUSEDNORM_PY_TORCH:-1}" = 1 ] || return 0
  "$venv/bin/python" -c 'import torch' 2>/dev/null && return 0
  # PyTorch's Linux wheels on PyPI bring about 4 GB of CUDA libraries (5.4 GB installed in all).
  # One pip call downloads every wheel before it installs any, so the disk must hold both at once;
  # installing the resolved set one wheel a call needs the installed size plus the largest wheel.
  pip install --quiet --dry-run --report "$dir/torch-wheels.json" torch
  local reqs
  reqs=$("$venv/bin/python" -c 'import json, sys
for p in json.load(open(sys.argv[1]))["install"]:
    print(p["metadata"]["name"] + "==" + p["metadata"]["version"])' "$dir/torch-wheels.json")
  for r in $reqs; do
    pip install --quiet --no-cache-dir --no-deps "$r"
  done
  "$venv/bin/python" -c 'import torch'
}
step "python: venv and test packages (pip)" setup

# The build tools are in the venv (above), so the build directory persists between runs and
# rebuilds incrementally; a plain `pip install ./python` (build isolation) gives the same wheel.
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
step "python: pip install ./python (libfusednorm + extension)" \
  "$venv/bin/python" -m pip install --quiet --no-cache-dir --no-build-isolation --force-reinstall --no-deps \
  ./python --config-settings=build-dir="$PWD/$dir/skbuild" \
  $(ccache_args | sed 's/-D/--config-settings=cmake.define./g')

export TORCHINDUCTOR_CACHE_DIR="$PWD/$dir/torchinductor" TRITON_CACHE_DIR="$PWD/$dir/triton"
export PYTHONDONTWRITEBYTECODE=1
"$venv/bin/python" -c 'import fusednorm, sys
try:
    import torch
    t = "PyTorch " + torch.__version__
except Exception as e:
    t = "no PyTorch (%s): its tests skip" % e
print("fusednorm %s (%s), %s" % (fusednorm.version(), fusednorm.cpu_target(), t))'
rc=0
step "python: pytest python/tests" "$venv/bin/python" -m pytest -p no:cacheprovider -q python/tests "$@" || rc=$?
exit $rc
