# Sourced by gpu.sh and multigpu.sh (GPU machines with nvcc 13, CMake and ninja and no network):
# libraries the system lacks (Highway, oneTBB, Catch2, DLPack) come from Debian .deb files in
# ${FUSEDNORM_DEPS_DIR:-.deps} (fetch them on a Debian 12 machine with `apt-get download libhwy-dev
# libhwy1 libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 catch2 libdlpack-dev libcli11-dev
# nlohmann-json3-dev`), unpacked under
# build-gpu/deps; NCCL's header, where the system has none, from ${FUSEDNORM_DEPS_DIR}/nccl/include
# (a copy of the nccl.h the CUDA toolkit or a development machine has), for the NCCL example.
# Sourced from the repository root: sets root, out (${OUT:-build-gpu/out}, created), gpu_tests and
# gpu_configure, the one CMake configuration of build-gpu that gpu.sh, multigpu.sh and gpu_pack.sh
# build in.
root=$PWD
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
deps_dir=${FUSEDNORM_DEPS_DIR:-$root/.deps}
if [ ! -f /usr/include/hwy/highway.h ]; then
  deps=$root/build-gpu/deps
  if [ ! -d "$deps/usr" ]; then
    mkdir -p "$deps"
    for f in "$deps_dir"/*.deb; do dpkg-deb -x "$f" "$deps"; done
  fi
  export CMAKE_PREFIX_PATH="$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$deps/usr/include${CPATH:+:$CPATH}"
fi
if [ -z "${NCCL_HOME:-}" ] && [ -f "$deps_dir/nccl/include/nccl.h" ] &&
   [ ! -f /usr/include/nccl.h ] && [ ! -f /usr/local/include/nccl.h ] && [ ! -f /usr/local/cuda/include/nccl.h ]; then
  export NCCL_HOME=$deps_dir/nccl
fi
# libnccl.so.2 where the toolkit keeps it (examples/CMakeLists.txt finds it there at build time).
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/lib"

# One GPU test executable per operation (tests/gpu/); gpu.sh also runs test_gpu_concurrency, the
# many-threads x many-streams test.
gpu_tests=(test_gpu_rmsnorm_quant test_gpu_rmsnorm_fp4 test_gpu_qk_rmsnorm test_gpu_mla)

# Configures build-gpu (Release, the CUDA plugin for ${FUSEDNORM_CUDA_ARCHITECTURES:-90a-real});
# extra CMake arguments follow.
gpu_configure() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEDNORM_CUDA=ON \
    -DFUSEDNORM_CUDA_ARCHITECTURES="${FUSEDNORM_CUDA_ARCHITECTURES:-90a-real}" "$@"
}
