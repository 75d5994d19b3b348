// A stand-in for libfusednorm_cuda.so, for the loader tests (tests/plugin/probe.cc): plain C++, no
// GPU. Built once per scenario, each copy named libfusednorm_cuda.so in its own directory:
//   FAKE_PLUGIN_ABI           the table claims FUSEDNORM_PLUGIN_ABI_VERSION + 1 (init must not run)
//   FAKE_PLUGIN_CALL_SIZE     the right version, but built against a larger RmsnormQuantCall
//   FAKE_PLUGIN_INIT_FAILS    init reports BACKEND_UNAVAILABLE with a vendor-style "no device"
//   FAKE_PLUGIN_DEVICE_ERROR  init succeeds with one device; rmsnorm_quant returns DEVICE_ERROR
//                             with a message that echoes the call it received
#include <stdio.h>

#include "core/plugin_abi.h"

#if !defined(FAKE_PLUGIN_ABI) && !defined(FAKE_PLUGIN_CALL_SIZE) && !defined(FAKE_PLUGIN_INIT_FAILS) && \
    !defined(FAKE_PLUGIN_DEVICE_ERROR)
#error "define one FAKE_PLUGIN_* scenario"
#endif

// How many times the core called init (the probe reads it: the ABI is "called once").
extern "C" {
__attribute__((visibility("default"))) int fusednorm_fake_init_calls = 0;
}

namespace {

fusednorm_status fake_init(char* msg, size_t n) {
  ++fusednorm_fake_init_calls;
#if defined(FAKE_PLUGIN_INIT_FAILS)
  snprintf(msg, n, "CUDA runtime: error 100 (cudaErrorNoDevice): no CUDA-capable device is detected");
  return FUSEDNORM_BACKEND_UNAVAILABLE;
#else
  return FUSEDNORM_SUCCESS;
#endif
}

int32_t fake_device_count() { return 1; }

void fake_describe(int32_t id, char* msg, size_t n) { snprintf(msg, n, "fake device %d", int(id)); }

fusednorm_status fake_rmsnorm_quant(const fusednorm::RmsnormQuantCall* call, int32_t device_id, void* stream,
                                    char* msg, size_t n) {
  snprintf(msg, n, "fake CUDA error 700 (cudaErrorIllegalAddress): h=%lld rows=%lld device=%d stream=%p",
           (long long)call->h, (long long)call->lead.rows, int(device_id), stream);
  return FUSEDNORM_DEVICE_ERROR;
}

#if defined(FAKE_PLUGIN_ABI)
constexpr uint32_t kAbi = FUSEDNORM_PLUGIN_ABI_VERSION + 1;
#else
constexpr uint32_t kAbi = FUSEDNORM_PLUGIN_ABI_VERSION;
#endif
#if defined(FAKE_PLUGIN_CALL_SIZE)
constexpr uint32_t kRmsnormCallSize = uint32_t(sizeof(fusednorm::RmsnormQuantCall)) + 8;
#else
constexpr uint32_t kRmsnormCallSize = uint32_t(sizeof(fusednorm::RmsnormQuantCall));
#endif

const fusednorm_plugin kPlugin = {
    kAbi,
    uint32_t(sizeof(fusednorm_plugin)),
    uint32_t(sizeof(fusednorm::CastCall)),
    kRmsnormCallSize,
    "cuda",
    kDLCUDA,
    fake_init,
    fake_device_count,
    fake_describe,
    nullptr,  // cast: not offered (the core answers UNSUPPORTED)
    fake_rmsnorm_quant,
    nullptr,  // verify_encoders
    nullptr,  // target
    nullptr,  // rmsnorm_fp4
    nullptr,  // dequantize_fp4
    uint32_t(sizeof(fusednorm::QkRmsnormCall)),
    nullptr,  // qk_rmsnorm: not offered
    uint32_t(sizeof(fusednorm::MlaCall)),
    nullptr,  // mla_rope_rmsnorm_quant: not offered
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const fusednorm_plugin* fusednorm_plugin_entry_cuda(void) {
  return &kPlugin;
}
