#!/usr/bin/env bash
# A/B timing on the device: the tuning harness (tests/bench/gpu_variants.cu) built from the working
# tree and from the GPU kernel sources of a git revision (backends/gpu and src/math as of REV),
# run in one process each, alternated twice, so that both see the same machine state. Prints the
# harness lines (time and output hash) of each run. Usage, in the repository root:
#   AB_ARGS="row:16384:8192 group128:16384:8192" [AB_DECODE="row:1:8192"] [REPS=60] \
#     bash tests/scripts/gpu_ab.sh REV|DIR
#   bash tests/scripts/gpu_ab.sh --export REV DIR    (REV's sources into DIR, no GPU needed)
# A checkout without REV's history (the device machine's copy of a working tree) takes a DIR
# exported beforehand. AB_ARGS run with VARIANT_REPS=${REPS:-60}; AB_DECODE with the harness's
# own reps (graph replay). DLPack's header comes from the system or the .deb in
# ${FUSEDNORM_DEPS_DIR:-.deps}. REV must have the current layout of backends/gpu/ (kernel_table.cuh,
# plan.h, tuning.h ...: the working tree's harness is built against it); older revisions, with
# the single backends/gpu/rmsnorm_quant.cuh, need that revision's own harness instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
export_rev() {  # REV DIR
  git rev-parse --verify --quiet "$1^{commit}" >/dev/null || { echo "gpu_ab.sh: no revision $1 here" >&2; exit 2; }
  rm -rf "$2" && mkdir -p "$2/backends/gpu" "$2/math"
  for f in $(git ls-tree --name-only "$1" backends/gpu/); do git show "$1:$f" >"$2/$f"; done
  for f in $(git ls-tree --name-only "$1" src/math/); do git show "$1:$f" >"$2/math/$(basename "$f")"; done
}
if [ "${1:-}" = --export ]; then export_rev "${2:?REV}" "${3:?DIR}"; exit 0; fi
rev=${1:?usage: gpu_ab.sh REV|DIR}
export PATH=$PATH:/usr/local/cuda/bin
out=${OUT:-$PWD/build-gpu/out}
mkdir -p "$out" build-gpu/ab
if [ -d "$rev" ]; then
  old=$rev
else
  old=build-gpu/ab/src-$rev
  export_rev "$rev" "$old"
fi
[ -f "$old/backends/gpu/kernel_table.cuh" ] || { echo "gpu_ab.sh: $old holds no backends/gpu of the current layout (kernel_table.cuh)" >&2; exit 2; }
inc=()
if [ ! -f /usr/include/dlpack/dlpack.h ]; then
  mkdir -p build-gpu/variant-deps
  for f in "${FUSEDNORM_DEPS_DIR:-.deps}"/libdlpack-dev*.deb; do dpkg-deb -x "$f" build-gpu/variant-deps; done
  inc=(-Ibuild-gpu/variant-deps/usr/include)
fi
flags=(-std=c++17 -O3 -arch=sm_90a -fmad=false -Iinclude)
nvcc "${flags[@]}" -I"$old" -Isrc -I. "${inc[@]}" -o build-gpu/ab/old tests/bench/gpu_variants.cu >"$out/ab_build_old.log" 2>&1 &
nvcc "${flags[@]}" -Isrc -I. "${inc[@]}" -o build-gpu/ab/new tests/bench/gpu_variants.cu >"$out/ab_build_new.log" 2>&1 &
wait
show() { grep -E " us " | sed -E 's/ +regs.*grid +[0-9]+ x +[0-9]+ +/ /; s/GB\/s.*hash/ /'; }
for k in 1 2; do
  for v in old new; do
    if [ -n "${AB_ARGS:-}" ]; then echo "== $v ($([ $v = old ] && echo "$rev" || echo "working tree")) $k"; VARIANT_REPS=${REPS:-60} build-gpu/ab/$v $AB_ARGS | show; fi
    if [ -n "${AB_DECODE:-}" ]; then echo "== decode $v $k"; build-gpu/ab/$v $AB_DECODE | show; fi
  done
done
