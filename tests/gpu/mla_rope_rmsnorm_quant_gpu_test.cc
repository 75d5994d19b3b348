// mla_rope_rmsnorm_quant on a GPU (kDLCUDA) through the public API, byte for byte against the CPU
// backend: the case mix of issue 20 (every written allocation read back in full, the cache's
// untouched slots and guards included), batch invariance (a sequence alone equals the same
// sequence inside a batch of 16), CUDA-graph capture and replay with new positions, and index
// values the host does not check on the GPU (page ids outside the cache, positions outside the
// table, page indices past the page table, row_offsets off either end or decreasing, negative or
// too large cache_len), on both GPU kernels: skipped tokens, counted in invalid_tokens, nothing
// written outside the rows of the valid tokens. Without a GPU every case prints FUSEDNORM_SKIP
// (ctest reports it as skipped).
#include <cuda_runtime.h>

#include <functional>

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

// Runs `host` (its index tensors possibly edited) on the GPU; returns whether that went through.
bool run_on_gpu(MlaCase& host, MlaDevice& gpu) {
  if (gpu.error() != cudaSuccess || gpu.enqueue() != FUSEDNORM_SUCCESS) return false;
  return cudaDeviceSynchronize() == cudaSuccess && gpu.download() == cudaSuccess;
}

// Whether token t's q_out rows are still the sentinel (the token was skipped) or equal `cpu`'s.
bool q_untouched(const MlaCase& host, int64_t t) {
  const size_t q_row = size_t(host.spec.r * dtype_bits(host.spec.in) / 8);
  for (int64_t h = 0; h < host.spec.heads; ++h) {
    const char* q = host.q_out->row(t * host.spec.heads + h);
    if (!std::all_of(q, q + q_row, [](char b) { return uint8_t(b) == 0xA5; })) return false;
  }
  return true;
}
bool q_as_cpu(const MlaCase& host, const MlaCase& cpu, int64_t t) {
  const size_t q_row = size_t(host.spec.r * dtype_bits(host.spec.in) / 8);
  for (int64_t h = 0; h < host.spec.heads; ++h)
    if (memcmp(host.q_out->row(t * host.spec.heads + h), cpu.q_out->row(t * host.spec.heads + h), q_row) != 0)
      return false;
  return true;
}

// Bad index values that the GPU cannot have checked on the host: `edit` applies them to a fresh
// case's index tensors; `skipped` are the tokens they make invalid. The GPU must skip exactly
// those (q rows and cache untouched), count them in invalid_tokens, and write every other token's
// q rows and cache row as the CPU writes them with the intact indices; every other byte of the
// cache allocation (other slots, other layers, guards) stays the sentinel.
void check_skipped(const MlaSpec& s, const char* what, const std::function<void(MlaCase&)>& edit,
                   const std::vector<int64_t>& skipped) {
  INFO(what << "; " << s.describe());
  MlaCase cpu(s), host(s);
  REQUIRE(cpu.run_library() == FUSEDNORM_SUCCESS);
  edit(host);
  MlaDevice gpu(host);
  REQUIRE(run_on_gpu(host, gpu));
  CHECK(gpu.invalid_tokens() == int32_t(skipped.size()));
  const size_t row = size_t((s.l + s.r) * dtype_bits(s.cache) / 8);
  const auto& st = host.cache_alloc->storage();
  std::vector<char> owned(st.size(), 0);
  for (int64_t t = 0; t < s.tokens(); ++t) {
    const bool skip = std::find(skipped.begin(), skipped.end(), t) != skipped.end();
    INFO("token " << t << (skip ? " (skipped)" : ""));
    CHECK((skip ? q_untouched(host, t) : q_as_cpu(host, cpu, t)));
    if (skip) continue;
    const size_t at = host.cache_row_byte(t);
    CHECK(memcmp(st.data() + at, cpu.cache_alloc->storage().data() + cpu.cache_row_byte(t), row) == 0);
    std::fill(owned.begin() + ptrdiff_t(at), owned.begin() + ptrdiff_t(at + row), 1);
  }
  size_t stray = 0;
  for (size_t i = 0; i < st.size(); ++i) stray += !owned[i] && st[i] != 0xA5;
  CHECK(stray == 0);
}

// Both GPU kernels (mla_fast.cuh takes the default spec: bf16, L 512, R 64, interleaved pairs,
// aligned views, and with a static scale its two-latent-warp form; the general kernel takes
// half-split pairs), int32 and int64 index tensors.
std::vector<MlaSpec> bad_index_specs(bool positions) {
  MlaSpec s;
  s.use_positions = positions;
  s.page_size = 4;
  s.heads = 8;
  s.seq_lens = {6, 1, 5};  // tokens 0..5, 6, 7..11
  s.cache_lens = {2, 9, 0};
  s.min_max_pos = 64;  // table rows past the page table's reach (max_pages * page_size is at most 16)
  s.seed = 8;
  MlaSpec scaled = s;  // the fast kernel with two latent warps
  scaled.cache = DType::k_f8e4m3fnuz;
  scaled.k_scale = 0.05f;
  MlaSpec general = s;
  general.neox = true;
  general.idx64 = true;
  general.cache = DType::k_f8e4m3fn;
  return {s, scaled, general};
}

TEST_CASE("gpu mla: bad index values skip their tokens, counted in invalid_tokens (both kernels)", "[gpu][mla]") {
  if (!gpu_available()) return;
  for (const MlaSpec& s : bad_index_specs(true)) {
    check_skipped(s, "sequence 0's second page id past the cache",
                  [](MlaCase& m) { m.page_table->set(0 * m.max_pages + 1, m.num_pages + 5); }, {2, 3, 4, 5});
    check_skipped(s, "a negative page id (sequence 2's first page)",
                  [](MlaCase& m) { m.page_table->set(2 * m.max_pages + 0, -3); }, {7, 8, 9, 10});
    check_skipped(s, "positions past the table and negative", [](MlaCase& m) {
      m.positions->set(6, m.cos_sin->rows());
      m.positions->set(11, -1);
    }, {6, 11});
    check_skipped(s, "a position inside the table whose page index is past the page table",
                  [](MlaCase& m) { m.positions->set(3, m.max_pages * m.spec.page_size + 1); }, {3});
    check_skipped(s, "row_offsets[0] = 1: token 0 in no sequence", [](MlaCase& m) { m.row_offsets->set(0, 1); }, {0});
    check_skipped(s, "row_offsets[B] = T - 2: tokens 10 and 11 in no sequence",
                  [](MlaCase& m) { m.row_offsets->set(3, 10); }, {10, 11});
  }
  for (const MlaSpec& s : bad_index_specs(false)) {
    check_skipped(s, "a negative cache_len (sequence 1)", [](MlaCase& m) { m.cache_len->set(1, -1); }, {6});
    check_skipped(s, "cache_len at the table's end (sequence 2)",
                  [](MlaCase& m) { m.cache_len->set(2, m.cos_sin->rows()); }, {7, 8, 9, 10, 11});
  }
}

// Decreasing row_offsets ({0, 9, 7, 12}: ranges [0, 9) and [7, 12), tokens 7 and 8 in both):
// the device may place such a token in either range, or skip it. Checked on both kernels: a token
// of one range is written as the CPU writes it when that range's page map gives it a row (the
// positions are explicit), else skipped; a token of two ranges is skipped or written; a written
// token's cache row is one of its ranges' rows; invalid_tokens counts exactly the tokens whose q
// rows are untouched; no other byte of the cache allocation is written.
TEST_CASE("gpu mla: decreasing row_offsets write nothing outside the rows a token can own", "[gpu][mla]") {
  if (!gpu_available()) return;
  for (const MlaSpec& s : bad_index_specs(true)) {
    INFO(s.describe());
    MlaCase cpu(s), host(s);
    REQUIRE(cpu.run_library() == FUSEDNORM_SUCCESS);
    const int64_t off[] = {0, 9, 7, 12};
    for (int64_t b = 0; b < 4; ++b) host.row_offsets->set(b, off[b]);
    MlaDevice gpu(host);
    REQUIRE(run_on_gpu(host, gpu));
    const size_t row = size_t((s.l + s.r) * dtype_bits(s.cache) / 8);
    const auto& st = host.cache_alloc->storage();
    std::vector<char> allowed(st.size(), 0);
    int32_t untouched = 0;
    for (int64_t t = 0; t < s.tokens(); ++t) {
      INFO("token " << t);
      std::vector<size_t> rows;  // the rows its ranges' page maps give it
      for (int64_t b = 0; b < 3; ++b)
        if (off[b] <= t && t < off[b + 1]) {
          const size_t at = host.cache_row_byte_at(b, host.pos[size_t(t)]);
          if (at != SIZE_MAX) rows.push_back(at);
        }
      const uint8_t* want = cpu.cache_alloc->storage().data() + cpu.cache_row_byte(t);
      const bool skipped = q_untouched(host, t);
      untouched += skipped;
      if (!skipped) {
        CHECK(q_as_cpu(host, cpu, t));
        CHECK(std::any_of(rows.begin(), rows.end(), [&](size_t at) { return memcmp(st.data() + at, want, row) == 0; }));
      }
      if (rows.empty()) CHECK(skipped);
      const bool one_range = (off[0] <= t && t < off[1]) != (off[2] <= t && t < off[3]);
      if (one_range && !rows.empty()) CHECK(!skipped);
      for (size_t at : rows) std::fill(allowed.begin() + ptrdiff_t(at), allowed.begin() + ptrdiff_t(at + row), 1);
    }
    CHECK(gpu.invalid_tokens() == untouched);
    size_t stray = 0;
    for (size_t i = 0; i < st.size(); ++i) stray += !allowed[i] && st[i] != 0xA5;
    CHECK(stray == 0);
  }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
