// mla_rope_rmsnorm_quant on a GPU (kDLCUDA) through the public API, byte for byte against the CPU
// backend: the case mix of issue 20 (every written allocation read back in full, the cache's
// untouched slots and guards included), batch invariance (a sequence alone equals the same
// sequence inside a batch of 16), CUDA-graph capture and replay with new positions, and index
// values the host does not check on the GPU (bad page ids, positions past the table, decreasing
// row_offsets): skipped tokens, counted in invalid_tokens, nothing written outside the
// tensors. Without a GPU every case prints FUSEDNORM_SKIP (ctest reports it as skipped).
#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include "common/device_mirror.h"
#include "common/mla_case.h"

namespace fusednorm {
namespace test {
namespace {

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

// A device view of host view `v`, whose storage `t` is mirrored by `m`.
DLTensor device_view(const DLTensor& v, HostTensor& t, DeviceMirror& m) {
  DLTensor d = v;
  d.data = static_cast<char*>(m.dl()->data) + (static_cast<char*>(v.data) - static_cast<char*>(t.dl()->data));
  d.device = DLDevice{kDLCUDA, 0};
  return d;
}

// An MlaCase mirrored on the GPU (every allocation, guards included), with an invalid_tokens
// counter (zero).
struct MlaDevice {
  MlaCase& h;
  IndexTensor counter{{1}, false};
  std::vector<std::unique_ptr<DeviceMirror>> mirrors;
  DLTensor q, q_out, kv, w, cs, pos, off, len, pt, cache, ks, inv;
  DeviceMirror *mq = nullptr, *mq_out = nullptr, *mcache = nullptr, *minv = nullptr, *mpos = nullptr, *mlen = nullptr,
               *moff = nullptr, *mpt = nullptr;

  explicit MlaDevice(MlaCase& c) : h(c) {
    counter.set(0, 0);
    mq = mirror(*c.q_alloc, c.q_view, &q);
    if (c.q_out) mq_out = mirror(*c.q_out, *c.q_out->dl(), &q_out);
    mirror(*c.kv, *c.kv->dl(), &kv);
    mirror(*c.weight, *c.weight->dl(), &w);
    mirror(*c.cos_sin, *c.cos_sin->dl(), &cs);
    if (c.positions) mpos = mirror(c.positions->bytes(), *c.positions->dl(), &pos);
    if (c.cache_len) mlen = mirror(c.cache_len->bytes(), *c.cache_len->dl(), &len);
    moff = mirror(c.row_offsets->bytes(), *c.row_offsets->dl(), &off);
    mpt = mirror(c.page_table->bytes(), *c.page_table->dl(), &pt);
    mcache = mirror(*c.cache_alloc, c.cache_view, &cache);
    if (c.k_scale) mirror(*c.k_scale, *c.k_scale->dl(), &ks);
    minv = mirror(counter.bytes(), *counter.dl(), &inv);
  }
  DeviceMirror* mirror(HostTensor& t, const DLTensor& view, DLTensor* out) {
    mirrors.push_back(std::make_unique<DeviceMirror>(t));
    *out = device_view(view, t, *mirrors.back());
    return mirrors.back().get();
  }
  cudaError_t error() const {
    for (const auto& m : mirrors)
      if (m->error() != cudaSuccess) return m->error();
    return cudaSuccess;
  }
  fusednorm_status enqueue(cudaStream_t stream = nullptr) {
    const auto o = h.options();
    return fusednorm_mla_rope_rmsnorm_quant(&q, h.q_out ? &q_out : nullptr, &kv, &w, &cs, h.positions ? &pos : nullptr,
                                            &off, h.cache_len ? &len : nullptr, &pt, &cache,
                                            h.k_scale ? &ks : nullptr, &inv, &o, stream);
  }
  cudaError_t download() {
    for (DeviceMirror* m : {mq, mq_out, mcache, minv})
      if (m != nullptr) {
        const cudaError_t e = m->download();
        if (e != cudaSuccess) return e;
      }
    return cudaSuccess;
  }
  int32_t invalid_tokens() {
    int32_t v;
    memcpy(&v, counter.dl()->data, 4);
    return v;
  }
};

bool gpu_available() { return cuda_backend_available(); }

// The CPU backend and the GPU on the same fresh inputs; every written allocation compared.
void check_gpu_case(const MlaSpec& s) {
  INFO(s.describe());
  MlaCase cpu(s), gpu_host(s);
  REQUIRE(cpu.run_library() == FUSEDNORM_SUCCESS);
  MlaDevice gpu(gpu_host);
  CUDA_OK(gpu.error());
  const fusednorm_status st = gpu.enqueue();
  INFO(fusednorm_last_error());
  REQUIRE(st == FUSEDNORM_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(gpu.download());
  REQUIRE(compare_mla(gpu_host, cpu) == "");
  REQUIRE(gpu.invalid_tokens() == 0);
}

TEST_CASE("gpu mla: equals the CPU backend for the case mix", "[gpu][mla]") {
  if (!gpu_available()) return;
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : uint64_t(time(nullptr));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 60; ++i) check_gpu_case(random_mla_spec(rng, i % 10 == 0 ? 16 << 20 : 1 << 20));
}

TEST_CASE("gpu mla: every L, R, pairing, misaligned views", "[gpu][mla]") {
  if (!gpu_available()) return;
  std::mt19937_64 rng(3);
  for (int64_t l : {8, 64, 512, 520, 4096, 16384})
    for (int64_t r : {8, 16, 64})
      for (int layout = 0; layout < 4; ++layout) {
        MlaSpec s;
        s.l = l;
        s.r = r;
        s.neox = layout % 2 == 1;
        s.heads = 5;
        s.page_size = 3;
        s.seq_lens = {3, 1, 5};
        s.cache_lens = {0, 7, 3};
        s.cache = layout >= 2 ? DType::k_f8e4m3fn : DType::kBF16;
        s.cs = layout >= 2 ? DType::kBF16 : DType::kF32;
        s.q_nope = layout >= 2 ? 3 : 0;  // q rows misaligned for vectors
        s.kv_pad = layout >= 2 ? 1 : 0;
        s.in = layout == 3 ? DType::kF32 : DType::kBF16;
        s.seed = rng();
        check_gpu_case(s);
      }
}

TEST_CASE("gpu mla: a sequence alone equals the same sequence in a batch of 16", "[gpu][mla]") {
  if (!gpu_available()) return;
  MlaSpec big;
  big.heads = 128;
  big.page_size = 64;
  big.cache = DType::k_f8e4m3fn;
  big.k_scale = 0.05f;
  big.seed = 99;
  big.seq_lens = {1, 256, 1, 17, 64, 1, 100, 3, 1, 250, 8, 1, 1, 40, 2, 129};
  big.cache_lens = {4095, 0, 63, 64, 1000, 0, 2048, 127, 4000, 3, 512, 1, 128, 77, 3071, 900};
  MlaCase all(big);
  MlaDevice all_gpu(all);
  CUDA_OK(all_gpu.error());
  REQUIRE(all_gpu.enqueue() == FUSEDNORM_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(all_gpu.download());
  int64_t first = 0;
  for (size_t b = 0; b < big.seq_lens.size(); first += big.seq_lens[b], ++b) {
    MlaSpec one = big;
    one.seq_lens = {big.seq_lens[b]};
    one.cache_lens = {big.cache_lens[b]};
    MlaCase part(one);
    // The sequence's inputs, copied from the batch (the weight and the table rows it reads too).
    const int64_t t_count = one.seq_lens[0];
    MlaCase& src = all;  // its inputs are intact (q_out is a tensor of its own)
    for (int64_t t = 0; t < t_count; ++t) {
      for (int64_t h = 0; h < big.heads; ++h)
        memcpy(part.q_alloc->row(t * big.heads + h), src.q_alloc->row((first + t) * big.heads + h),
               size_t((big.q_nope + big.r) * 2));
      memcpy(part.kv->row(t), src.kv->row(first + t), size_t((big.l + big.r) * 2));
    }
    part.weight->copy_from(*src.weight);
    for (int64_t p = 0; p < std::min(part.cos_sin->rows(), src.cos_sin->rows()); ++p)
      memcpy(part.cos_sin->row(p), src.cos_sin->row(p), size_t(big.r * 4));
    MlaDevice gpu(part);
    CUDA_OK(gpu.error());
    REQUIRE(gpu.enqueue() == FUSEDNORM_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(gpu.download());
    INFO("sequence " << b << " (" << t_count << " tokens at " << one.cache_lens[0] << ")");
    const size_t row = size_t(big.l + big.r), q_row = size_t(big.r * 2);
    for (int64_t t = 0; t < t_count; ++t) {
      for (int64_t h = 0; h < big.heads; ++h)
        REQUIRE(memcmp(part.q_out->row(t * big.heads + h), all.q_out->row((first + t) * big.heads + h), q_row) == 0);
      REQUIRE(memcmp(part.cache_alloc->storage().data() + part.cache_row_byte(t),
                     all.cache_alloc->storage().data() + all.cache_row_byte(first + t), row) == 0);
    }
  }
}

TEST_CASE("gpu mla: CUDA graph capture and replay with new positions", "[gpu][mla][graph]") {
  if (!gpu_available()) return;
  MlaSpec s;
  s.use_positions = true;
  s.page_size = 16;
  s.heads = 16;
  s.seq_lens = {5, 1, 9};
  s.cache_lens = {30, 0, 77};
  s.min_max_pos = 16 * 6;  // every slot of every page a token uses has a table row
  s.seed = 21;
  MlaCase host(s), pristine(s);
  MlaDevice gpu(host);
  CUDA_OK(gpu.error());
  CapturedCall graph([&](cudaStream_t stream) { return gpu.enqueue(stream); });
  CUDA_OK(graph.error);
  REQUIRE(graph.status == FUSEDNORM_SUCCESS);
  for (int round = 0; round < 3; ++round) {
    // New positions: each token moves to another slot of its page (a bijection per page).
    MlaCase want(s);
    for (int64_t t = 0; t < s.tokens(); ++t) {
      const int64_t p = pristine.pos[size_t(t)];
      const int64_t np = p / 16 * 16 + (p % 16 + 5 * round) % 16;
      want.pos[size_t(t)] = host.pos[size_t(t)] = np;
      want.positions->set(t, np);
      host.positions->set(t, np);
    }
    // Fresh outputs (sentinel) and the new positions on the device, then replay.
    host.cache_alloc->storage() = pristine.cache_alloc->storage();
    host.q_out->storage() = pristine.q_out->storage();
    for (DeviceMirror* m : {gpu.mpos, gpu.mcache, gpu.mq_out}) CUDA_OK(m->upload());
    CUDA_OK(graph.replay());
    CUDA_OK(gpu.download());
    REQUIRE(want.run_library() == FUSEDNORM_SUCCESS);
    INFO("round " << round);
    REQUIRE(compare_mla(host, want) == "");
  }
}

// Index values the GPU cannot have checked on the host: tokens with a bad page id or position are
// skipped (their q_out rows and cache slots untouched) and counted; the other tokens are written
// as the CPU writes them; nothing outside the tensors is written.
TEST_CASE("gpu mla: bad index values skip their tokens, counted in invalid_tokens", "[gpu][mla]") {
  if (!gpu_available()) return;
  MlaSpec s;
  s.use_positions = true;
  s.page_size = 4;
  s.heads = 8;
  s.seq_lens = {6, 1, 5};
  s.cache_lens = {2, 9, 0};
  s.seed = 8;
  MlaCase cpu(s);
  REQUIRE(cpu.run_library() == FUSEDNORM_SUCCESS);
  for (int variant = 0; variant < 3; ++variant) {
    MlaCase host(s);
    std::vector<int64_t> skipped;
    if (variant == 0) {  // sequence 0's second page (tokens 2..5) past the cache
      host.page_table->set(0 * host.max_pages + 1, host.num_pages + 5);
      skipped = {2, 3, 4, 5};
    } else if (variant == 1) {  // a negative page id (sequence 2's first page: tokens 7..10)
      host.page_table->set(2 * host.max_pages + 0, -3);
      skipped = {7, 8, 9, 10};
    } else {  // positions past the table and negative
      host.positions->set(6, host.cos_sin->rows());
      host.positions->set(11, -1);
      skipped = {6, 11};
    }
    MlaDevice gpu(host);
    CUDA_OK(gpu.error());
    REQUIRE(gpu.enqueue() == FUSEDNORM_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(gpu.download());
    INFO("variant " << variant);
    CHECK(gpu.invalid_tokens() == int32_t(skipped.size()));
    const size_t row = size_t((s.l + s.r) * 2), q_row = size_t(s.r * 2);
    for (int64_t t = 0; t < s.tokens(); ++t) {
      const bool skip = std::find(skipped.begin(), skipped.end(), t) != skipped.end();
      INFO("token " << t << (skip ? " (skipped)" : ""));
      const uint8_t* cache_row = host.cache_alloc->storage().data() + host.cache_row_byte(t);
      for (int64_t h = 0; h < s.heads; ++h) {
        const char* q = host.q_out->row(t * s.heads + h);
        if (skip) CHECK(std::all_of(q, q + q_row, [](char b) { return uint8_t(b) == 0xA5; }));
        else CHECK(memcmp(q, cpu.q_out->row(t * s.heads + h), q_row) == 0);
      }
      if (skip) {
        if (!(variant == 2)) continue;  // its page id is bad: it has no row of its own
        // A bad position: the token's row under the valid map (the CPU's) stays untouched.
        const uint8_t* r0 = host.cache_alloc->storage().data() + host.cache_row_byte(t);
        CHECK(std::all_of(r0, r0 + row, [](uint8_t b) { return b == 0xA5; }));
      } else {
        CHECK(memcmp(cache_row, cpu.cache_alloc->storage().data() + cpu.cache_row_byte(t), row) == 0);
      }
    }
    // Every other cache byte (and every guard) is still the sentinel: the written bytes are
    // exactly the valid tokens' rows.
    size_t written = 0;
    for (uint8_t b : host.cache_alloc->storage()) written += b != 0xA5;
    size_t expected = 0;
    for (int64_t t = 0; t < s.tokens(); ++t)
      if (std::find(skipped.begin(), skipped.end(), t) == skipped.end()) {
        const uint8_t* r = cpu.cache_alloc->storage().data() + cpu.cache_row_byte(t);
        for (size_t i = 0; i < row; ++i) expected += r[i] != 0xA5;
      }
    CHECK(written == expected);
  }
  // Decreasing row_offsets: whatever the tokens get, nothing outside the tensors is written, and
  // the tokens without a sequence are counted.
  MlaCase host(s);
  host.row_offsets->set(1, 9);  // {0, 9, 7, 12}: tokens 7 and 8 are in [0, 9) and in nothing after
  MlaDevice gpu(host);
  CUDA_OK(gpu.error());
  REQUIRE(gpu.enqueue() == FUSEDNORM_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(gpu.download());
  CHECK(compare_mla(host, host) == "");  // guards intact (compare_mla checks them)
  CHECK(gpu.invalid_tokens() >= 0);
  CHECK(gpu.invalid_tokens() <= int32_t(s.tokens()));
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
