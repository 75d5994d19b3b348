#!/usr/bin/env bash
# GPU build, tests and benchmark in one script, for an NVIDIA machine with nvcc 13, CMake and
# ninja and no network (libraries the system lacks: tests/scripts/gpu_env.sh). Logs go to
# ${OUT:-build-gpu/out}. Several GPUs: tests/scripts/multigpu.sh.
# Usage: bash tests/scripts/gpu.sh [build|test|sanitize|bench|python|compare|profile|all]...
# (default: all but python, compare and profile; python: the Python package built against this
# build, its pytest suite with the CUDA cases of python/tests/test_gpu.py, and the per-call
# overhead (pytest arguments: ${FUSEDNORM_PYTEST_ARGS:-python/tests}), with python3 holding PyTorch, NumPy, ml_dtypes, pytest, nanobind and
# scikit-build-core (the device image); compare: tests/bench/torch_compare.py, fusednorm against
# torch.compile, with ${FUSEDNORM_COMPARE_ARGS:---tokens 1,8,16384}; needs PyTorch with Triton)
# FUSEDNORM_GPU_BIN=DIR: binaries built elsewhere (tests/scripts/gpu_pack.sh on a development
# machine packs them into build-carry/): no build step, everything runs from DIR (not python).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/gpu_env.sh
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
want() {
  for s in "${steps[@]}"; do
    { [ "$s" = all ] && [ "$1" != profile ] && [ "$1" != compare ] && [ "$1" != python ]; } || [ "$s" = "$1" ] && return 0
  done
  return 1
}
status=0
note() { echo "== $*" | tee -a "$out/summary.txt"; }
bin=$root/build-gpu
if [ -n "${FUSEDNORM_GPU_BIN:-}" ]; then
  bin=$(cd "$FUSEDNORM_GPU_BIN" && pwd) || exit 1
  export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  note "build: prebuilt binaries in $bin ($(cat "$bin/PACKED" 2>/dev/null))"
  if want python; then note "python: needs a build tree (cmake --install), not FUSEDNORM_GPU_BIN"; exit 1; fi
fi

if [ -z "${FUSEDNORM_GPU_BIN:-}" ] && { want build || want test || want sanitize || want bench || want python || want compare || want profile; }; then
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
    $bin/tests/$t >"$out/$t.log" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    note "$t: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -2 "$out/$t.log" | tr '\n' ' ')"
  done
  # Many host threads x many streams at once (tests/gpu/concurrency_gpu_test.cc).
  t0=$(date +%s)
  $bin/tests/test_gpu_concurrency >"$out/gpu_concurrency.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  note "gpu concurrency: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -2 "$out/gpu_concurrency.log" | tr '\n' ' ')"
  # qk_rmsnorm's NCCL example with one rank, and with every GPU when there are several
  # (docs/tensor_parallel.md).
  if [ -x "$bin/examples/fusednorm-qk-tp-nccl" ]; then
    ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
    for g in 1 $([ "$ngpu" -gt 1 ] && echo "$ngpu"); do
      $bin/examples/fusednorm-qk-tp-nccl --gpus "$g" >"$out/nccl_qk_tp_$g.log" 2>&1
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
        $bin/tests/$t "~[large]" "~[graph]" >"$out/sanitizer_${tool}_$t.log" 2>&1
      rc=$?; [ $rc -eq 0 ] || status=1
      note "compute-sanitizer $tool $t: rc=$rc in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|All tests passed|test cases' "$out/sanitizer_${tool}_$t.log" | tr '\n' ' ')"
    done
  done
  # The many-threads x many-streams test under memcheck.
  t0=$(date +%s)
  compute-sanitizer --tool memcheck --error-exitcode 3 \
    $bin/tests/test_gpu_concurrency >"$out/sanitizer_memcheck_concurrency.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  note "compute-sanitizer memcheck (concurrency): rc=$rc in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|All tests passed|test cases' "$out/sanitizer_memcheck_concurrency.log" | tr '\n' ' ')"
fi

if want bench; then
  t0=$(date +%s)
  $bin/fusednorm-bench --device cuda:0 ${FUSEDNORM_BENCH_ARGS:-} >"$out/bench_gpu.txt" 2>"$out/bench_gpu.err"
  rc=$?; [ $rc -eq 0 ] || status=1
  note "bench: rc=$rc in $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  $bin/fusednorm-bench --device cuda:0 --ops mla ${FUSEDNORM_BENCH_MLA_ARGS:-} >"$out/bench_gpu_mla.txt" \
    2>"$out/bench_gpu_mla.err"
  rc=$?; [ $rc -eq 0 ] || status=1
  note "bench mla: rc=$rc in $(( $(date +%s) - t0 )) s"
fi
if want python; then
  # libfusednorm and the CUDA plugin installed under build-gpu/inst, the package built against
  # them (docs/python.md) into build-gpu/site, then the whole suite (test_gpu.py's CUDA and CuPy
  # cases run where PyTorch sees a GPU) and call_overhead.py.
  t0=$(date +%s)
  inst=$root/build-gpu/inst site=$root/build-gpu/site
  rm -rf "$site"
  { cmake --install build-gpu --prefix "$inst" &&
    python3 -m pip install --no-build-isolation --no-deps --no-index --target "$site" ./python \
      -Ccmake.define.FUSEDNORM_PYTHON_USE_INSTALLED=ON -Ccmake.define.fusednorm_ROOT="$inst"; } \
    >"$out/python_build.log" 2>&1
  rc=$?
  note "python package: rc=$rc in $(( $(date +%s) - t0 )) s"
  if [ $rc -eq 0 ]; then
    # Import order (docs/python.md, known problems): each module imported before torch, in a
    # fresh interpreter; and the shared libraries each of fusednorm and torch maps on its own.
    for m in numpy ml_dtypes fusednorm._C fusednorm; do
      PYTHONPATH=$site timeout 120 python3 -X faulthandler -c "import $m; import torch" >"$out/py_import_$m.log" 2>&1
      note "import $m, then torch: rc=$?$(grep -m1 -o 'File .*line [0-9]*' "$out/py_import_$m.log" | sed 's/^/: /')"
    done
    # The C library alone (no nanobind module), loaded as _C loads it, then torch; and the native
    # stack of the crash where gdb is installed.
    timeout 120 python3 -c "import ctypes; ctypes.CDLL('$inst/lib/libfusednorm.so.0'); import torch" >"$out/py_import_lib.log" 2>&1
    note "libfusednorm.so.0 through ctypes, then torch: rc=$?"
    if command -v gdb >/dev/null; then
      PYTHONPATH=$site timeout 180 gdb -q -batch -ex run -ex bt -ex 'info sharedlibrary' --args python3 -c "import fusednorm._C; import torch" \
        >"$out/py_import_gdb.log" 2>&1
      note "gdb: $(grep -m8 '^#' "$out/py_import_gdb.log" | cut -c1-160 | tr '\n' ' ')"
    fi
    for m in fusednorm torch; do
      PYTHONPATH=$site python3 -c "import $m; print(open('/proc/self/maps').read())" 2>&1 |
        awk '$6 ~ /\.so/ {print $6}' | sort -u >"$out/py_maps_$m.txt"
    done
    join -t/ -j1 <(sed 's|.*/||' "$out/py_maps_fusednorm.txt" | sort -u) <(sed 's|.*/||' "$out/py_maps_torch.txt" | sort -u) |
      while read -r lib; do
        a=$(grep "/$lib\$" "$out/py_maps_fusednorm.txt" | tr '\n' ' ') b=$(grep "/$lib\$" "$out/py_maps_torch.txt" | tr '\n' ' ')
        [ "$a" = "$b" ] || note "  $lib: fusednorm maps $a, torch maps $b"
      done
    t0=$(date +%s)
    PYTHONPATH=$site python3 -m pytest -q -p no:cacheprovider -rs ${FUSEDNORM_PYTEST_ARGS:-python/tests} >"$out/pytest.log" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    note "pytest: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest.log")"
    PYTHONPATH=$site python3 python/benchmarks/call_overhead.py >"$out/call_overhead.txt" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    note "call overhead: rc=$rc ($out/call_overhead.txt)"
  else
    status=1
    tail -20 "$out/python_build.log"
  fi
fi
if want compare; then
  t0=$(date +%s)
  python3 tests/bench/torch_compare.py --lib $bin/libfusednorm.so ${FUSEDNORM_COMPARE_ARGS:---tokens 1,8,16384} \
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
    $bin/fusednorm-bench --device cuda:0 ${FUSEDNORM_PROFILE_ARGS:---in bf16 --out f8e4m3fn --modes row --hidden 8192 --tokens 16384 --reps 3} \
    >"$out/ncu.txt" 2>&1
  note "profile: rc=$? ($out/ncu.txt)"
fi
cat "$out/summary.txt"
exit $status
