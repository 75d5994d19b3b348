// The CPU backend's function table (core/plugin_abi.h), linked into libfusednorm.so: src/api.cc
// reaches the CPU exactly as it reaches the GPU plugins. Calls arrive validated.
#include <stdio.h>

#include <tbb/info.h>

#include "hwy/targets.h"

#include "backends/cpu/cpu_backend.h"
#include "core/plugin_abi.h"

namespace fusednorm {
namespace {

const char* cpu_target_name() {
  // Lower target bits are better; dispatch takes the best target both supported and compiled.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(usable & -usable);
}

fusednorm_status cpu_init(char*, size_t) { return FUSEDNORM_SUCCESS; }
int32_t cpu_device_count() { return 1; }
void cpu_describe(int32_t, char* msg, size_t n) {
  snprintf(msg, n, "Highway target %s; oneTBB, %d threads in the default arena", cpu_target_name(),
           tbb::info::default_concurrency());
}
fusednorm_status cpu_cast_entry(const CastCall* call, int32_t, void*, char*, size_t) {
  cpu_cast(*call);
  return FUSEDNORM_SUCCESS;
}
fusednorm_status cpu_rmsnorm_quant_entry(const RmsnormQuantCall* call, int32_t, void*, char*, size_t) {
  switch (call->in_type) {
    case DType::kF32: cpu_rmsnorm_quant_f32(*call); break;
    case DType::kF16: cpu_rmsnorm_quant_f16(*call); break;
    default: cpu_rmsnorm_quant_bf16(*call); break;  // validation admits no other input
  }
  return FUSEDNORM_SUCCESS;
}
fusednorm_status cpu_mla_entry(const MlaCall* call, int32_t, void*, char*, size_t) {
  cpu_mla_rope_rmsnorm_quant(*call);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status cpu_rmsnorm_fp4_entry(const RmsnormFp4Call* call, int32_t, void*, char*, size_t) {
  cpu_rmsnorm_fp4(*call);
  return FUSEDNORM_SUCCESS;
}
fusednorm_status cpu_dequantize_fp4_entry(const DequantizeFp4Call* call, int32_t, void*, char*, size_t) {
  cpu_dequantize_fp4(*call);
  return FUSEDNORM_SUCCESS;
}
fusednorm_status cpu_qk_rmsnorm_entry(const QkRmsnormCall* call, int32_t, void*, char*, size_t) {
  cpu_qk_rmsnorm(*call);
  return FUSEDNORM_SUCCESS;
}

const fusednorm_plugin kCpuBackend = {
    FUSEDNORM_PLUGIN_ABI_VERSION,
    uint32_t(sizeof(fusednorm_plugin)),
    uint32_t(sizeof(CastCall)),
    uint32_t(sizeof(RmsnormQuantCall)),
    "cpu",
    kDLCPU,
    cpu_init,
    cpu_device_count,
    cpu_describe,
    cpu_cast_entry,
    cpu_rmsnorm_quant_entry,
    nullptr,  // verify_encoders: the CPU's encoders are proven by tests/cpu/encoders_exhaustive_test.cc
    cpu_target_name,
    cpu_rmsnorm_fp4_entry,
    cpu_dequantize_fp4_entry,
    uint32_t(sizeof(QkRmsnormCall)),
    cpu_qk_rmsnorm_entry,
    uint32_t(sizeof(MlaCall)),
    cpu_mla_entry,
};

}  // namespace
}  // namespace fusednorm

extern "C" const fusednorm_plugin* fusednorm_plugin_entry_cpu(void) { return &fusednorm::kCpuBackend; }
