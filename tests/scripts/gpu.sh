#!/usr/bin/env bash
# GPU build, tests and benchmark in one script, for an NVIDIA machine with nvcc 13, CMake and
# ninja and no network (libraries the system lacks: tests/scripts/gpu_env.sh). Logs go to
# ${OUT:-build-gpu/out}. Several GPUs: tests/scripts/multigpu.sh.
# Usage: bash tests/scripts/gpu.sh [build|test|sanitize|bench|compare|profile|all]...
# (default: all but compare and profile; compare: tests/bench/torch_compare.py, fusednorm against
# torch.compile, with ${FUSEDNORM_COMPARE_ARGS:---tokens 1,8,16384}; needs PyTorch with Triton)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/gpu_env.sh
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
want() { for s in "${steps[@]}"; do { [ "$s" = all ] && [ "$1" != profile ] && [ "$1" != compare ]; } || [ "$s" = "$1" ] && return 0; done; return 1; }
status=0
# One GPU test executable per operation (tests/gpu/), and the many-threads x many-streams test.
gpu_tests=(test_gpu_rmsnorm_quant test_gpu_rmsnorm_fp4 test_gpu_qk_rmsnorm test_gpu_mla)
note() { echo "== $*" | tee -a "$out/summary.txt"; }

if want build || want test || want sanitize || want bench || want compare || want profile; then
  t0=$(date +%s)
  gpu_configure >"$out/configure.log" 2>&1 &&
    ninja -C build-gpu fusednorm fusednorm_cuda fusednorm-bench "${gpu_tests[@]}" test_gpu_concurrency \
      >"$out/build.log" 2>&1
  rc=$?
  # qk_rmsnorm's NCCL example, where configure found NCCL (examples/CMakeLists.txt).
  if [ $rc -eq 0 ] && ninja -C build-gpu -t targets all | grep -q '^fusednorm-qk-tp-nccl:'; then
    ninja -C build-gpu fusednorm-qk-tp-nccl >>"$out/build.log" 2>&1
    rc=$?
  fi
  note "build: rc=$rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || { tail -30 "$out/build.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"

if want test; then
  for t in "${gpu_tests[@]}"; do
    t0=$(date +%s)
    ./build-gpu/tests/$t >"$out/$t.log" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    note "$t: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -2 "$out/$t.log" | tr '\n' ' ')"
  done
  # Many host threads x many streams at once (tests/gpu/concurrency_gpu_test.cc).
  t0=$(date +%s)
  ./build-gpu/tests/test_gpu_concurrency >"$out/gpu_concurrency.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  note "gpu concurrency: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -2 "$out/gpu_concurrency.log" | tr '\n' ' ')"
  # qk_rmsnorm's NCCL example with one rank, and with every GPU when there are several
  # (docs/tensor_parallel.md).
  if [ -x build-gpu/examples/fusednorm-qk-tp-nccl ]; then
    ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
    for g in 1 $([ "$ngpu" -gt 1 ] && echo "$ngpu"); do
      ./build-gpu/examples/fusednorm-qk-tp-nccl --gpus "$g" >"$out/nccl_qk_tp_$g.log" 2>&1
      rc=$?; [ $rc -eq 0 ] || status=1
      note "nccl qk_rmsnorm TP, $g GPU(s): rc=$rc: $(tail -1 "$out/nccl_qk_tp_$g.log")"
    done
  fi
fi

if want sanitize; then
  for t in "${gpu_tests[@]}"; do
    for tool in memcheck racecheck initcheck synccheck; do
      t0=$(date +%s)
      compute-sanitizer --tool $tool --error-exitcode 3 \
        ./build-gpu/tests/$t "~[large]" "~[graph]" >"$out/sanitizer_${tool}_$t.log" 2>&1
      rc=$?; [ $rc -eq 0 ] || status=1
      note "compute-sanitizer $tool $t: rc=$rc in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|All tests passed|test cases' "$out/sanitizer_${tool}_$t.log" | tr '\n' ' ')"
    done
  done
  # The many-threads x many-streams test under memcheck.
  t0=$(date +%s)
  compute-sanitizer --tool memcheck --error-exitcode 3 \
    ./build-gpu/tests/test_gpu_concurrency >"$out/sanitizer_memcheck_concurrency.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  note "compute-sanitizer memcheck (concurrency): rc=$rc in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|All tests passed|test cases' "$out/sanitizer_memcheck_concurrency.log" | tr '\n' ' ')"
fi

if want bench; then
  t0=$(date +%s)
  ./build-gpu/fusednorm-bench --device cuda:0 ${FUSEDNORM_BENCH_ARGS:-} >"$out/bench_gpu.txt" 2>"$out/bench_gpu.err"
  rc=$?; [ $rc -eq 0 ] || status=1
  note "bench: rc=$rc in $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  ./build-gpu/fusednorm-bench --device cuda:0 --ops mla ${FUSEDNORM_BENCH_MLA_ARGS:-} >"$out/bench_gpu_mla.txt" \
    2>"$out/bench_gpu_mla.err"
  rc=$?; [ $rc -eq 0 ] || status=1
  note "bench mla: rc=$rc in $(( $(date +%s) - t0 )) s"
fi
if want compare; then
  t0=$(date +%s)
  python3 tests/bench/torch_compare.py --lib build-gpu/libfusednorm.so ${FUSEDNORM_COMPARE_ARGS:---tokens 1,8,16384} \
    >"$out/torch_compare.txt" 2>"$out/torch_compare.err"
  rc=$?; [ $rc -eq 0 ] || status=1
  note "compare: rc=$rc in $(( $(date +%s) - t0 )) s"
fi
if want profile; then
  # One rmsnorm_quant launch under Nsight Compute (clocks left alone), for the shape in
  # FUSEDNORM_PROFILE_ARGS (default: bf16 -> e4m3fn, dynamic per-row, 16384 x 8192).
  ncu --clock-control none --kernel-name regex:rmsnorm_quant_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    ./build-gpu/fusednorm-bench --device cuda:0 ${FUSEDNORM_PROFILE_ARGS:---in bf16 --out f8e4m3fn --modes row --hidden 8192 --tokens 16384 --reps 3} \
    >"$out/ncu.txt" 2>&1
  note "profile: rc=$? ($out/ncu.txt)"
fi
cat "$out/summary.txt"
exit $status
