// Test helper: an owning CPU buffer viewed as a DLTensor, with optional row padding (strided
// leading dimension) and a deliberate misalignment of the data pointer.
#pragma once

#include <stdint.h>
#include <string.h>

#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/elements.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace test {

class HostTensor {
 public:
  HostTensor() = default;
  // shape: all dims; row_pad: extra elements between rows (strided leading dim);
  // misalign: bytes added to the data pointer (0 = 64-byte aligned).
  HostTensor(DType type, std::vector<int64_t> shape, int64_t row_pad = 0, int misalign = 0)
      : type_(type), shape_(std::move(shape)) {
    const int nd = int(shape_.size());
    strides_.assign(size_t(nd), 1);
    for (int i = nd - 2; i >= 0; --i)
      strides_[size_t(i)] = strides_[size_t(i + 1)] * shape_[size_t(i + 1)] + (i == nd - 2 ? row_pad : 0);
    int64_t span = 1;
    for (int i = 0; i < nd; ++i) span += (shape_[size_t(i)] - 1) * strides_[size_t(i)];
    if (nd == 0) span = 1;
    bytes_ = size_t((span * dtype_bits(type) + 7) / 8);
    storage_.assign(bytes_ + 128, uint8_t(0xA5));  // poison: untouched bytes stay 0xA5
    offset_ = size_t((64 - reinterpret_cast<uintptr_t>(storage_.data()) % 64) % 64) + size_t(misalign);
    dl_ = DLTensor{};
    dl_.data = storage_.data() + offset_;
    dl_.device = DLDevice{kDLCPU, 0};
    dl_.ndim = nd;
    dl_.dtype = dl_from_dtype(type);
    dl_.shape = shape_.data();
    dl_.strides = strides_.data();
  }
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  DLTensor* dl() { return &dl_; }
  DType type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t cols() const { return shape_.back(); }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape_.size(); ++i) r *= shape_[i];
    return r;
  }
  // Byte pointer to row r (leading dims flattened row-major).
  char* row(int64_t r) {
    int64_t off = 0;
    for (int i = int(shape_.size()) - 2; i >= 0; --i) {
      off += (r % shape_[size_t(i)]) * strides_[size_t(i)];
      r /= shape_[size_t(i)];
    }
    return static_cast<char*>(dl_.data) + off * dtype_bits(type_) / 8;
  }
  uint32_t code(int64_t r, int64_t i) { return load_code(type_, row(r), i); }
  void set_code(int64_t r, int64_t i, uint32_t c) { store_code(type_, row(r), i, c); }
  float get(int64_t r, int64_t i) { return decode(type_, code(r, i)); }
  void set(int64_t r, int64_t i, float v) { set_code(r, i, encode<true>(type_, v)); }
  // All bytes of the allocation, padding and guards included.
  const std::vector<uint8_t>& storage() const { return storage_; }
  std::vector<uint8_t>& storage() { return storage_; }
  // Copies the data bytes of a tensor of the same type, shape and layout.
  void copy_from(const HostTensor& o) { memcpy(dl_.data, o.dl_.data, bytes_); }
  size_t data_bytes() const { return bytes_; }
  const uint8_t* data_begin() const { return static_cast<const uint8_t*>(dl_.data); }

 private:
  DType type_ = DType::kF32;
  std::vector<int64_t> shape_, strides_;
  std::vector<uint8_t> storage_;
  size_t bytes_ = 0, offset_ = 0;
  DLTensor dl_{};
};

}  // namespace test
}  // namespace fusednorm
