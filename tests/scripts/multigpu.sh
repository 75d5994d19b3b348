#!/usr/bin/env bash
# Tensor-parallel QK-norm on several GPUs of one host (docs/tensor_parallel.md): the NCCL example
# (examples/nccl/qk_rmsnorm_tp.cc) over R = 2 and R = every GPU, heads split unevenly, in one
# process driving all GPUs and in one process per GPU, bf16 and f32; then the per-layer cost of
# stats -> all-reduce -> apply (a CUDA graph per rank) at the shapes of a MiniMax-M2-like layer
# (q 48 x 128, k 8 x 128 heads in the full model) beside the single-GPU fused call at the same shape.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Logs and summary.md go to ${OUT:-build-gpu/out}.
# Usage: bash tests/scripts/multigpu.sh [build] [test] [bench]   (default: all three)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/gpu_env.sh
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test bench)
want() { for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
export NCCL_NVLS_ENABLE=0
summary=$out/multigpu_summary.md
status=0
exe=./build-gpu/examples/fusednorm-qk-tp-nccl

if want build; then
  t0=$(date +%s)
  gpu_configure >"$out/multigpu_configure.log" 2>&1 &&
    ninja -C build-gpu fusednorm fusednorm_cuda fusednorm-qk-tp-nccl >"$out/multigpu_build.log" 2>&1
  rc=$?
  echo "build: rc=$rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || { tail -30 "$out/multigpu_configure.log" "$out/multigpu_build.log"; exit 1; }
fi
[ -x "$exe" ] || { echo "no $exe (NCCL not found at configure: set NCCL_HOME)"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
{
  echo "# Tensor-parallel QK-norm, $ngpu GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
  echo
  echo "NCCL_NVLS_ENABLE=0, libnccl: $(ldd "$exe" | grep -o '/[^ ]*libnccl[^ ]*' || echo '?'), $(date -u +%F)"
} >"$summary"

# Uneven splits for R ranks: 40 q heads as 17/23 (R = 2), 64 as 15/16/16/17 (R = 4), else the
# example's default (an even split with one head moved from the last rank to the first).
split_args() {
  case $1 in
    2) echo "--q-heads 40 --k-heads 8 --q-split 17,23 --k-split 3,5" ;;
    4) echo "--q-heads 64 --k-heads 8 --q-split 15,16,16,17 --k-split 1,2,2,3" ;;
    *) echo "--q-heads $((16 * $1)) --k-heads 8" ;;
  esac
}
ranks_list=$( { [ "$ngpu" -ge 2 ] && echo 2; [ "$ngpu" -gt 2 ] && echo "$ngpu"; } | xargs)
[ -n "$ranks_list" ] || echo "only $ngpu GPU: the multi-rank runs need 2 or more" | tee -a "$summary"

# One run: log name, then the example's arguments. Records PASS/FAIL in the summary.
run() {
  local name=$1; shift
  local t0=$(date +%s)
  "$exe" "$@" >"$out/mgpu_$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || status=1
  echo "| $name | \`$*\` | rc=$rc, $(tail -1 "$out/mgpu_$name.log") | $(( $(date +%s) - t0 )) s |" >>"$summary"
}
# One process per GPU: R processes, rank 0 writes the NCCL id.
run_procs() {
  local name=$1 R=$2; shift 2
  local id=$out/mgpu_$name.id pids=() rc=0 t0=$(date +%s)
  rm -f "$id"
  for ((r = 0; r < R; ++r)); do
    "$exe" --nranks "$R" --rank "$r" --id-file "$id" "$@" >"$out/mgpu_${name}_rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || status=1
  echo "| $name | \`--nranks $R --rank r --id-file F $*\` x $R processes | rc=$rc, $(for ((r = 0; r < R; ++r)); do tail -1 "$out/mgpu_${name}_rank$r.log"; done | sort | uniq -c | xargs) | $(( $(date +%s) - t0 )) s |" >>"$summary"
}

if want test; then
  { echo; echo "## Correctness"; echo; echo "| run | arguments | result | time |"; echo "|---|---|---|---|"; } >>"$summary"
  run tp1_bf16 --gpus 1
  for R in $ranks_list; do
    args=$(split_args "$R")
    run "tp${R}_bf16" --gpus "$R" $args --rows 2048
    run "tp${R}_f32" --gpus "$R" $args --rows 2048 --dtype f32
    run "tp${R}_bf16_rows16384" --gpus "$R" $args --rows 16384 --iters 20
    run_procs "tp${R}_procs_bf16" "$R" $args --rows 2048
  done
fi

if want bench; then
  { echo; echo "## Per-layer cost, MiniMax-M2-like layer (q 48 x 128, k 8 x 128 heads in all), bf16"; echo
    echo "Graph replays timed with events on each rank's stream; the fused column is the single-GPU"
    echo "fused call on all heads on GPU 0 (rank 0) in the same run."; echo
    echo "| ranks | q split | k split | rows | stats -> all-reduce -> apply, us (rank 0 / ... / R-1) | single-GPU fused, us | check |"
    echo "|---|---|---|---|---|---|---|"; } >>"$summary"
  for R in 1 $ranks_list; do
    case $R in
      1) qs=48; ks=8 ;;
      2) qs=20,28; ks=3,5 ;;
      4) qs=11,12,12,13; ks=1,2,2,3 ;;
      8) qs=5,6,6,6,6,6,6,7; ks=1,1,1,1,1,1,1,1 ;;
      *) qs=""; ks="" ;;
    esac
    for rows in 1 8 64 4096; do
      name=bench_tp${R}_rows$rows
      iters=500; [ "$rows" -gt 64 ] && iters=200
      extra=(); [ -n "$qs" ] && extra=(--q-split "$qs" --k-split "$ks")
      "$exe" --gpus "$R" --q-heads 48 --k-heads 8 "${extra[@]}" --rows "$rows" --iters "$iters" \
        >"$out/mgpu_$name.log" 2>&1 || status=1
      tp=$(grep -o 'apply: [0-9.]* us' "$out/mgpu_$name.log" | awk '{print $2}' | xargs | tr ' ' '/')
      fused=$(grep -o 'fused call (all heads): [0-9.]* us' "$out/mgpu_$name.log" | awk '{print $5}')
      echo "| $R | ${qs:-default} | ${ks:-default} | $rows | $tp | $fused | $(tail -1 "$out/mgpu_$name.log") |" >>"$summary"
    done
  done
fi
cat "$summary"
exit $status
