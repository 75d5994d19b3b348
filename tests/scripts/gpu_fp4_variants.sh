#!/usr/bin/env bash
# Builds the rmsnorm_fp4 tuning harness (tests/bench/gpu_fp4_variants.cu) once per variant, on a
# development machine (nvcc, no GPU needed) or on the device, into ${FP4_VARIANTS_DIR:-fp4var}/:
#   bash tests/scripts/gpu_fp4_variants.sh NAME="FLAGS" ...
# FLAGS: nvcc flags of that variant (-D settings of backends/gpu, or -I DIR for another source
# tree, e.g. one exported by `tests/scripts/gpu_ab.sh --export REV DIR`), and patch:FILE for the
# working tree's backends/gpu and src/math with FILE applied (tests/bench/variants/); "" builds
# the working tree as it is. For example, the variants of tests/bench/variants/fp4_wide_reload.patch:
#   bash tests/scripts/gpu_fp4_variants.sh base="" \
#     r64="patch:tests/bench/variants/fp4_wide_reload.patch -DFN_FP4W_REGS=64 -DFN_FP4W_CHUNK=2" \
#     r48="patch:tests/bench/variants/fp4_wide_reload.patch -DFN_FP4W_REGS=48 -DFN_FP4W_CHUNK=1" \
#     r40="patch:tests/bench/variants/fp4_wide_reload.patch -DFN_FP4W_REGS=40 -DFN_FP4W_CHUNK=1"
# Builds run two at a time. Then, on the device:
#   for v in base r64 r48 r40; do echo "== $v"; fp4var/$v nvfp4:16384:8192 mxfp4s:16384:8192 ...; done
# (cases FORMAT:ROWS:H[:res]; each line ends with a hash of the codes and scales, which must be
# the same in every variant). HARNESS=tests/bench/gpu_variants.cu builds rmsnorm_quant's harness
# instead (cases MODE:ROWS:H, MODE static, row, group128 or residual, _fnuz for f8e4m3fnuz).
# DLPack's header comes from the system or the .deb in ${FUSEDNORM_DEPS_DIR:-.deps}.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/cuda/bin
dir=${FP4_VARIANTS_DIR:-fp4var}
mkdir -p "$dir"
inc=()
if [ ! -f /usr/include/dlpack/dlpack.h ]; then
  mkdir -p build-gpu/variant-deps
  for f in "${FUSEDNORM_DEPS_DIR:-.deps}"/libdlpack-dev*.deb; do dpkg-deb -x "$f" build-gpu/variant-deps; done
  inc=(-Ibuild-gpu/variant-deps/usr/include)
fi
build() {  # NAME FLAGS
  local flags=() f
  for f in $2; do
    if [ "${f#patch:}" != "$f" ]; then
      local src=build-gpu/fp4-variants/src-$1
      rm -rf "$src" && mkdir -p "$src/backends" && cp -r backends/gpu "$src/backends/gpu" && cp -r src/math "$src/math"
      sed -n '/^diff --git/,$p' "${f#patch:}" | patch -s -p1 -d "$src" || { echo "$1: the patch does not apply"; return 1; }
      flags+=(-I"$src")
    else
      flags+=("$f")
    fi
  done
  nvcc -std=c++17 -O3 -arch=sm_90a -fmad=false "${flags[@]}" -Iinclude -Isrc -I. "${inc[@]}" -Xptxas -v \
    -o "$dir/$1" "${HARNESS:-tests/bench/gpu_fp4_variants.cu}" >"$dir/$1.log" 2>&1 && echo "$1: built" || echo "$1: FAILED ($dir/$1.log)"
}
jobs=0
for v in "$@"; do
  build "${v%%=*}" "${v#*=}" &
  jobs=$((jobs + 1))
  if [ $jobs -ge 2 ]; then wait -n; jobs=$((jobs - 1)); fi
done
wait
