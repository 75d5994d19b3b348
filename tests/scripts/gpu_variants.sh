#!/usr/bin/env bash
# Tuning run on the device: builds tests/bench/gpu_variants.cu once per setting of the tuning
# constants (in parallel) and runs each; logs under ${OUT:-build-gpu/out}. DLPack's header comes
# from the system or from the .deb in ${FUSEDNORM_DEPS_DIR:-.deps} (see tests/scripts/gpu.sh). Usage:
#   bash tests/scripts/gpu_variants.sh "NAME=VALUE ..." ...     ("" = the library's settings)
# NAME: a constant of backends/gpu/tuning.h (kMaxNReg8, kRowThreads, kElemsPerThread); a variant
# builds against a copy of backends/gpu/ (build-gpu/variants/src-vN) whose tuning.h line
# `constexpr int NAME = ...;` says VALUE instead.
# VARIANT_ROUNDS=N: run the variants N times, alternating, and print the minimum / mean time of
# each case and variant over the rounds (summary.txt). VARIANT_SETS=1: every call on the same buffers (L2-resident).
# (VARIANT_GENERAL=1: every case through the general kernel instead of its fast one;
# VARIANT_SMEM_PAD=BYTES: that much more shared memory a block, i.e. fewer blocks an SM;
# VARIANT_GAP=BYTES: an unused allocation before each case's buffers, which then lie elsewhere.)
# VARIANT_ARGS="mix H ...": streaming floors of the calls' byte mixes at 16384 x H, no arithmetic
# (tests/bench/gpu_variants.cu, mix_floor; MIX_BPS blocks an SM for the flat loops, default 8).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/build-gpu/out}
mkdir -p "$out" build-gpu/variants
inc=()
if [ ! -f /usr/include/dlpack/dlpack.h ]; then
  mkdir -p build-gpu/variant-deps  # not build-gpu/deps: gpu.sh unpacks all the .debs there
  for f in "${FUSEDNORM_DEPS_DIR:-.deps}"/libdlpack-dev*.deb; do dpkg-deb -x "$f" build-gpu/variant-deps; done
  inc=(-Ibuild-gpu/variant-deps/usr/include)
fi
variants=("$@")
for i in "${!variants[@]}"; do
  src=build-gpu/variants/src-v$i
  rm -rf "$src" && mkdir -p "$src/backends" && cp -r backends/gpu "$src/backends/gpu"
  ok=1
  for d in ${variants[$i]}; do
    name=${d%%=*} value=${d#*=}
    if ! grep -Eq "^constexpr int $name = [^;]+;" "$src/backends/gpu/tuning.h"; then
      echo "variant ${variants[$i]}: $name is no constant of backends/gpu/tuning.h" >"$out/build_v$i.log"; ok=0
    fi
    sed -i -E "s/^(constexpr int $name = )[^;]+;/\1$value;/" "$src/backends/gpu/tuning.h"
  done
  rm -f build-gpu/variants/v$i
  [ $ok = 1 ] || continue
  nvcc -std=c++17 -O3 -arch=sm_90a -fmad=false -Xptxas -v -Iinclude -I"$src" -Isrc -I. "${inc[@]}" \
    -o build-gpu/variants/v$i tests/bench/gpu_variants.cu >"$out/build_v$i.log" 2>&1 &
done
wait
rounds=${VARIANT_ROUNDS:-1}
: >"$out/runs.log"
for ((r = 1; r <= rounds; ++r)); do  # the variants alternate, so drifts of the machine hit all alike
  for i in "${!variants[@]}"; do
    if [ -x build-gpu/variants/v$i ]; then
      echo "== v$i round $r: ${variants[$i]:-(library)}"
      build-gpu/variants/v$i ${VARIANT_ARGS:-} 2>&1 | tee "$out/run_v${i}_r$r.log"
      grep ' us ' "$out/run_v${i}_r$r.log" | sed "s/^/v$i r$r /" >>"$out/runs.log"
    elif [ "$r" = 1 ]; then
      echo "variant ${variants[$i]}: build failed"; tail -20 "$out/build_v$i.log"
    fi
  done
done
# Summary: per case and variant, the minimum and mean time over the rounds, and whether every
# round of every variant printed the same output hash for the case.
if [ "$rounds" -gt 1 ]; then
  awk '{ v = $1; key = $3 " " $4 "x" $6; t = ""; h = ""; for (k = 1; k <= NF; ++k) { if ($k == "us") t = $(k - 1); if ($k == "hash") h = $(k + 1) }
         if (!(key in seen)) { seen[key] = 1; order[++n] = key; hash[key] = h } else if (hash[key] != h) bad[key] = 1
         if (!((key, v) in mn) || t < mn[key, v]) mn[key, v] = t; sum[key, v] += t; cnt[key, v]++; if (substr(v, 2) + 0 > nv) nv = substr(v, 2) + 0 }
       END { for (k = 1; k <= n; ++k) { line = sprintf("%-24s", order[k])
               for (i = 0; i <= nv; ++i) if ((order[k], v = "v" i) in mn)
                 line = line sprintf("  %s %8.2f /%8.2f", v, mn[order[k], v], sum[order[k], v] / cnt[order[k], v])
               print line (order[k] in bad ? "  HASHES DIFFER" : "  same hashes") } }' "$out/runs.log" |
    tee "$out/summary.txt"
fi
# VARIANT_NCU=1: Nsight Compute on one launch of the first variant (the case VARIANT_NCU_CASE,
# default dynamic per-row 16384 x 8192):
# the details and the per-instruction source view (SASS, with executed counts) as text.
if [ -n "${VARIANT_NCU:-}" ] && [ -x build-gpu/variants/v0 ]; then
  VARIANT_REPS=4 ncu --clock-control none --kernel-name regex:rmsnorm_quant_kernel --launch-skip 2 --launch-count 1 \
    --set full --import-source no -o "$out/variant_prof" -f build-gpu/variants/v0 "${VARIANT_NCU_CASE:-row:16384:8192}" >"$out/ncu_run.txt" 2>&1
  ncu --import "$out/variant_prof.ncu-rep" --print-details all >"$out/ncu_details.txt" 2>&1
  ncu --import "$out/variant_prof.ncu-rep" --page source --csv --print-source sass >"$out/ncu_source.csv" 2>&1
  rm -f "$out/variant_prof.ncu-rep"
fi
