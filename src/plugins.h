// Every backend through one function table (core/plugin_abi.h): the CPU backend linked in, the GPU
// backends as plugins found and loaded on first use for a device type, never unloaded.
#pragma once

#include <string>

#include "core/plugin_abi.h"

namespace fusednorm {

struct PluginState {
  const fusednorm_plugin* table = nullptr;  // non-null once loaded and initialized
  std::string error;                        // why not, every attempt listed
};

// The backend of kDLCPU (linked in), kDLCUDA or kDLROCM (loaded once, thread-safe); later calls
// return the same state.
const PluginState& plugin_for(int32_t device_type);

// The file name searched for, e.g. "libfusednorm_cuda.so".
const char* plugin_file_name(int32_t device_type);

}  // namespace fusednorm
