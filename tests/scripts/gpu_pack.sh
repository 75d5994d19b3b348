#!/usr/bin/env bash
# Builds the CUDA binaries on a development machine (nvcc, no GPU needed) in build-gpu, the
# configuration gpu.sh uses, and packs what the GPU steps run into ${1:-build-carry}: the library,
# the CUDA plugin beside it, fusednorm-bench, the GPU tests and the NCCL example. On the GPU
# machine (the working tree with .deps/, and the pack carried along):
#   FUSEDNORM_GPU_BIN=build-carry bash tests/scripts/gpu.sh test bench
# runs without building there, which spares the 4-5 minutes of a full build on the lent GPU
# machine. The pack names its commit in PACKED; build-carry/ is ignored by git (build*/).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/scripts/gpu_env.sh
dest=${1:-build-carry}
[ -f build-gpu/build.ninja ] || gpu_configure >/dev/null
targets=(fusednorm fusednorm_cuda fusednorm-bench "${gpu_tests[@]}" test_gpu_concurrency)
if ninja -C build-gpu -t targets all | grep -q '^fusednorm-qk-tp-nccl:'; then targets+=(fusednorm-qk-tp-nccl); fi
ninja -C build-gpu "${targets[@]}"
rm -rf "$dest"
mkdir -p "$dest/tests" "$dest/examples"
cp -P build-gpu/libfusednorm.so* build-gpu/libfusednorm_cuda.so build-gpu/fusednorm-bench "$dest/"
for t in "${gpu_tests[@]}" test_gpu_concurrency; do cp "build-gpu/tests/$t" "$dest/tests/"; done
if [ -x build-gpu/examples/fusednorm-qk-tp-nccl ]; then cp build-gpu/examples/fusednorm-qk-tp-nccl "$dest/examples/"; fi
changes=$(git status --porcelain --untracked-files=no | wc -l)
echo "commit $(git rev-parse --short HEAD)$([ "$changes" -eq 0 ] || echo " with $changes changed files"), packed $(date -u +%FT%TZ)" \
  >"$dest/PACKED"
echo "$dest: $(du -sh "$dest" | cut -f1) ($(cat "$dest/PACKED"))"
