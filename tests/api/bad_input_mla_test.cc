// Bad input, fusednorm_mla_rope_rmsnorm_quant: each row breaks one thing of a valid call (Mla
// below) and is checked by the harness of tests/common/bad_call.h: status, message fragments,
// nothing written (every allocation, the cache in full), the reference rejecting identically, in
// a forked child. Index values (page ids, positions, row_offsets) are read by the validation on
// CPU tensors (fusednorm.h, "Index values").
#include <catch2/catch.hpp>

#include "api/bad_input_calls.h"
#include "fusednorm/fusednorm.hpp"

namespace fusednorm {
namespace test {
namespace {

using namespace mut;  // NOLINT: the tables read as field = value

enum { kQ, kQOut, kKv, kWt, kCs, kPos, kOff, kLen, kPt, kCache, kKs, kInvTok };

// T = 3 tokens in B = 2 sequences (row_offsets {0, 2, 3}, cache_len {5, 0}: positions 5, 6 and 0),
// bf16 q [3, 2, 8] (R = 8) and kv [3, 16] (L = 8), f32 cos_sin [16, 8], int32 page_table
// {{-7, 0}, {2, -7}} (page_size 4: token 0 and 1 on page 0, slots 1 and 2; token 2 on page 2, slot
// 0), bf16 cache [3, 4, 16]. A valid call as built.
class Mla : public Args {
 public:
  Mla()
      : Args({"q", "q_out", "kv", "weight", "cos_sin", "positions", "row_offsets", "cache_len", "page_table", "kv_cache",
              "k_scale", "invalid_tokens"}) {
    fusednorm_mla_rope_rmsnorm_quant_options_init(&opts);
    make(kQ, DType::kBF16, {3, 2, 8});
    make(kQOut, DType::kBF16, {3, 2, 8});
    make(kKv, DType::kBF16, {3, 16});
    make(kWt, DType::kBF16, {8});
    make(kCs, DType::kF32, {16, 8});
    index(kOff, {0, 2, 3}, {3});
    index(kLen, {5, 0}, {2});
    index(kPt, {-7, 0, 2, -7}, {2, 2});
    make(kCache, DType::kBF16, {3, 4, 16});
    set_null(kPos);
    set_null(kKs);
    set_null(kInvTok);
  }
  // Slot s as an int32 (or int64) tensor of `shape` holding `values`.
  void index(int s, const std::vector<int64_t>& values, const std::vector<int64_t>& shape, int bits = 32) {
    make(s, DType::kI8, {int64_t(values.size()) * bits / 8 + 8});
    char* p = static_cast<char*>(dl(s).data);
    for (size_t i = 0; i < values.size(); ++i) {
      if (bits == 64) memcpy(p + 8 * i, &values[i], 8);
      else {
        const int32_t v = int32_t(values[i]);
        memcpy(p + 4 * i, &v, 4);
      }
    }
    dl(s).dtype = DLDataType{kDLInt, uint8_t(bits), 1};
    std::vector<int64_t> strides(shape.size(), 1);
    for (int i = int(shape.size()) - 2; i >= 0; --i) strides[size_t(i)] = strides[size_t(i) + 1] * shape[size_t(i) + 1];
    set_layout(s, shape, strides);
  }
  fusednorm_status call() override {
    return fusednorm_mla_rope_rmsnorm_quant(ptr(kQ), ptr(kQOut), ptr(kKv), ptr(kWt), ptr(kCs), ptr(kPos), ptr(kOff),
                                            ptr(kLen), ptr(kPt), ptr(kCache), ptr(kKs), ptr(kInvTok),
                                            null_opts ? nullptr : &opts, nullptr);
  }
  fusednorm_status call_reference() override {
    return reference::mla_rope_rmsnorm_quant(ptr(kQ), ptr(kQOut), ptr(kKv), ptr(kWt), ptr(kCs), ptr(kPos), ptr(kOff),
                                             ptr(kLen), ptr(kPt), ptr(kCache), ptr(kKs), ptr(kInvTok),
                                             null_opts ? nullptr : &opts);
  }
  fusednorm_mla_rope_rmsnorm_quant_options opts;
  bool null_opts = false;
};

using M = std::function<void(Mla&)>;
M idx(int s, std::vector<int64_t> values, std::vector<int64_t> shape, int bits = 32) {
  return [=](Mla& c) { c.index(s, values, shape, bits); };
}
M with_positions(std::vector<int64_t> values) {
  return [=](Mla& c) {
    c.set_null(kLen);
    c.index(kPos, values, {int64_t(values.size())});
  };
}

}  // namespace

TEST_CASE("mla: index values (CPU tensors)", "[bad_input][mla]") {
  const BadTable<Mla> table = {
      {"page id past the cache", idx(kPt, {-7, 3, 2, -7}, {2, 2}), kInvalid,
       {"page_table[0, 1] = 3", "outside the cache's 3 pages", "[3, 4, 16]"}},
      {"negative page id", idx(kPt, {-7, 0, -1, -7}, {2, 2}), kInvalid, {"page_table[1, 0] = -1", "token 2"}},
      {"position past the cos/sin table (cache_len)", remake(kCs, DType::kF32, {6, 8}), kInvalid,
       {"token 1 (sequence 0) has position 6", "cache_len[0] = 5", "6 positions", "[6, 8]"}},
      {"position past the cos/sin table (positions)", with_positions({5, 6, 16}), kInvalid,
       {"token 2 (sequence 1) has position 16", "positions[2]", "16 positions"}},
      {"negative position", with_positions({5, -1, 0}), kInvalid, {"token 1", "position -1"}},
      {"page index past page_table's columns", idx(kLen, {8, 0}, {2}), kInvalid,
       {"token 0 (sequence 0) at position 8 needs page 2", "page_table has shape [2, 2]"}},
      {"row_offsets not non-decreasing", idx(kOff, {0, 3, 2}, {3}), kInvalid,
       {"row_offsets is not non-decreasing", "row_offsets[2] = 2 < row_offsets[1] = 3"}},
      {"row_offsets[0] not 0", idx(kOff, {1, 2, 3}, {3}), kInvalid, {"row_offsets[0] = 1: must be 0"}},
      {"row_offsets[B] not T", idx(kOff, {0, 2, 2}, {3}), kInvalid, {"row_offsets[2] = 2", "T = 3"}},
      {"negative cache_len", idx(kLen, {5, -1}, {2}), kInvalid, {"cache_len[1] = -1 is negative"}},
      {"two tokens on one slot", all<Mla>({idx(kPt, {-7, 0, 0, -7}, {2, 2}), idx(kLen, {5, 1}, {2})}), kInvalid,
       {"tokens 0 and 2 both write cache page 0, slot 1"}},
      {"two tokens on one slot (int64 page ids)", all<Mla>({idx(kPt, {-7, 2, 2, -7}, {2, 2}, 64), idx(kLen, {4, 1}, {2})}),
       kInvalid, {"both write cache page 2, slot 1"}},
  };
  run_bad_cases(table);
}

TEST_CASE("mla: shapes and sizes", "[bad_input][mla]") {
  const BadTable<Mla> table = {
      {"L not a multiple of 8",
       all<Mla>({remake(kKv, DType::kBF16, {3, 20}), remake(kWt, DType::kBF16, {12}),
                 remake(kCache, DType::kBF16, {3, 4, 20})}),
       kInvalid, {"L = 12", "multiple of 8"}},
      {"R not a multiple of 8",
       all<Mla>({remake(kQ, DType::kBF16, {3, 2, 6}), remake(kQOut, DType::kBF16, {3, 2, 6})}), kInvalid,
       {"R = 6", "multiple of 8"}},
      {"q of rank 2", remake(kQ, DType::kBF16, {3, 16}), kInvalid, {"q has shape [3, 16]", "[T, Hq, R]"}},
      {"kv tokens differ", remake(kKv, DType::kBF16, {2, 16}), kInvalid, {"kv has shape [2, 16]", "T"}},
      {"q_out shape differs", remake(kQOut, DType::kBF16, {3, 1, 8}), kInvalid, {"q_out has shape [3, 1, 8]"}},
      {"weight length differs", remake(kWt, DType::kBF16, {16}), kInvalid, {"weight has shape [16]", "L"}},
      {"cos_sin width differs", remake(kCs, DType::kF32, {16, 16}), kInvalid, {"cos_sin has shape [16, 16]"}},
      {"cache row width differs", remake(kCache, DType::kBF16, {3, 4, 24}), kInvalid, {"kv_cache has shape [3, 4, 24]"}},
      {"page size 0", remake(kCache, DType::kBF16, {3, 0, 16}), kInvalid, {"page size", ">= 1"}},
      {"cache_len length differs", idx(kLen, {5, 0, 0}, {3}), kInvalid, {"cache_len has shape [3]", "B"}},
      {"page_table rows differ", idx(kPt, {-7, 0}, {1, 2}), kInvalid, {"page_table has shape [1, 2]"}},
      {"positions length differs", with_positions({5, 6}), kInvalid, {"positions has shape [2]"}},
      {"row_offsets empty", idx(kOff, {}, {0}), kInvalid, {"row_offsets has shape [0]"}},
      {"positions and cache_len both given", [](Mla& c) { c.index(kPos, {5, 6, 0}, {3}); }, kInvalid,
       {"exactly one of them"}},
      {"neither positions nor cache_len", null(kLen), kInvalid, {"exactly one of them"}},
      {"k_scale of two elements", remake(kKs, DType::kF32, {2}), kInvalid, {"k_scale has shape [2]"}},
      {"q NULL", null(kQ), kInvalid, {"q is NULL"}},
      {"kv_cache NULL", null(kCache), kInvalid, {"kv_cache is NULL"}},
      {"page_table NULL", null(kPt), kInvalid, {"page_table is NULL"}},
      {"kv_cache.data NULL", null_data(kCache), kInvalid, {"kv_cache.data is NULL"}},
  };
  run_bad_cases(table);
}

TEST_CASE("mla: dtypes, devices, options, overlap", "[bad_input][mla]") {
  const BadTable<Mla> table = {
      {"kv dtype differs from q", remake(kKv, DType::kF32, {3, 16}), kInvalid, {"kv.dtype = f32", "q.dtype = bf16"}},
      {"q_out dtype differs from q", remake(kQOut, DType::kF16, {3, 2, 8}), kInvalid,
       {"q_out.dtype = f16", "q.dtype = bf16"}},
      {"FP8 q", all<Mla>({remake(kQ, DType::k_f8e4m3fn, {3, 2, 8})}), kUnsupported, {"q.dtype = f8e4m3fn"}},
      {"f16 cos_sin", remake(kCs, DType::kF16, {16, 8}), kUnsupported, {"cos_sin.dtype = f16", "f32 or bf16"}},
      {"int8 cache", remake(kCache, DType::kI8, {3, 4, 16}), kUnsupported, {"kv_cache.dtype = int8"}},
      {"f4e2m1 cache", remake(kCache, DType::k_f4e2m1, {3, 4, 16}), kUnsupported, {"kv_cache.dtype = f4e2m1"}},
      {"float page table", dtype(kPt, DLDataType{kDLFloat, 32, 1}), kUnsupported, {"page_table.dtype", "int32 or int64"}},
      {"int16 row_offsets", dtype(kOff, DLDataType{kDLInt, 16, 1}), kUnsupported, {"row_offsets.dtype", "int32 or int64"}},
      {"f16 k_scale", remake(kKs, DType::kF16, {1}), kUnsupported, {"k_scale.dtype", "f32"}},
      {"f32 invalid_tokens", remake(kInvTok, DType::kF32, {1}), kUnsupported, {"invalid_tokens.dtype", "int32"}},
      {"kv on another device", device(kKv, kDLCUDA, 0), kInvalid, {"kv is on cuda:0", "q is on cpu:0"}},
      {"rope_style 2", [](Mla& c) { c.opts.rope_style = 2; }, kInvalid, {"options->rope_style = 2"}},
      {"negative eps", [](Mla& c) { c.opts.eps = -1.0f; }, kInvalid, {"options->eps = -1"}},
      {"infinite weight_offset", [](Mla& c) { c.opts.weight_offset = kInf; }, kInvalid, {"options->weight_offset = inf"}},
      {"short options struct", [](Mla& c) { c.opts.struct_size = 8; }, kInvalid, {"options->struct_size = 8"}},
      {"q_out over kv", [](Mla& c) { c.dl(kQOut).data = c.dl(kKv).data; }, kInvalid, {"q_out and kv overlap"}},
      {"cache over cos_sin", [](Mla& c) { c.dl(kCache).data = c.dl(kCs).data; }, kInvalid,
       {"cos_sin and kv_cache overlap"}},
      {"q in place over itself (stride 0)", all<Mla>({null(kQOut), strides(kQ, {0, 8, 1})}), kInvalid,
       {"q.strides[0] = 0"}},
      {"misaligned int32 page_table", byte_offset(kPt, 2), kInvalid, {"page_table: data", "byte_offset 2", "4-byte"}},
      {"misaligned int64 positions", all<Mla>({with_positions({5, 6, 0}), [](Mla& c) { c.index(kPos, {5, 6, 0}, {3}, 64); },
                                               byte_offset(kPos, 4)}),
       kInvalid, {"positions: data", "8-byte"}},
      {"misaligned invalid_tokens", all<Mla>({remake(kInvTok, DType::kI8, {8}), dtype(kInvTok, DLDataType{kDLInt, 32, 1}),
                                               shape(kInvTok, {1}), byte_offset(kInvTok, 1)}),
       kInvalid, {"invalid_tokens: data", "4-byte"}},
      {"cache slots overlapping", strides(kCache, {16, 8, 1}), kInvalid, {"kv_cache", "overlap"}},
  };
  run_bad_cases(table);
}

TEST_CASE("mla: valid calls equal the reference (controls)", "[bad_input][mla]") {
  const std::vector<Control<Mla>> table = {
      {"baseline", [](Mla&) {}},
      {"q in place", [](Mla& c) { c.set_null(kQOut); }},
      {"invalid_tokens given (the CPU rejects bad index values: never written)",
       [](Mla& c) { c.index(kInvTok, {0}, {1}); }},
      {"explicit positions, int64, neox, FP8 cache with k_scale",
       [](Mla& c) {
         c.set_null(kLen);
         c.index(kPos, {4, 7, 3}, {3}, 64);
         c.opts.rope_style = FUSEDNORM_ROPE_NEOX;
         c.make(kCache, DType::k_f8e4m3fn, {3, 4, 16});
         c.make(kKs, DType::kF32, {1});
         c.tensor(kKs).set(0, 0, 0.25f);
       }},
  };
  run_controls(table);
}

TEST_CASE("mla: a call without tokens succeeds and writes nothing", "[bad_input][mla]") {
  Mla c;
  c.make(kQ, DType::kBF16, {0, 2, 8});
  c.make(kQOut, DType::kBF16, {0, 2, 8});
  c.make(kKv, DType::kBF16, {0, 16});
  c.index(kOff, {0}, {1});
  c.index(kLen, {}, {0});
  c.index(kPt, {}, {0, 2});
  c.snapshot();
  REQUIRE(status_name(c.call()) == "SUCCESS");
  REQUIRE(status_name(c.call_reference()) == "SUCCESS");
  CHECK(c.changes() == "");
}

TEST_CASE("mla: the C++ API throws the status and message", "[bad_input][mla]") {
  Mla c;
  c.index(kPt, {-7, 5, 2, -7}, {2, 2});
  try {
    fusednorm::mla_rope_rmsnorm_quant(*c.ptr(kQ), c.ptr(kQOut), *c.ptr(kKv), *c.ptr(kWt), *c.ptr(kCs), nullptr,
                                      *c.ptr(kOff), c.ptr(kLen), *c.ptr(kPt), *c.ptr(kCache));
    FAIL("no exception");
  } catch (const fusednorm::Error& e) {
    CHECK(e.status() == FUSEDNORM_INVALID_ARGUMENT);
    CHECK_THAT(e.what(), Catch::Contains("page_table[0, 1] = 5"));
  }
  Mla ok;
  fusednorm::MlaRopeRmsnormQuantOptions o;
  o.rope_style = FUSEDNORM_ROPE_NEOX;
  fusednorm::mla_rope_rmsnorm_quant(*ok.ptr(kQ), nullptr, *ok.ptr(kKv), *ok.ptr(kWt), *ok.ptr(kCs), nullptr,
                                    *ok.ptr(kOff), ok.ptr(kLen), *ok.ptr(kPt), *ok.ptr(kCache), nullptr, nullptr, o);
}

}  // namespace test
}  // namespace fusednorm
