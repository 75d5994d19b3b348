#include "plugins.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/plugin_abi.h"

#if defined(FUSEDNORM_STATIC_CUDA)
extern "C" const fusednorm_plugin* fusednorm_plugin_entry_cuda(void);
#endif
#if defined(FUSEDNORM_STATIC_HIP)
extern "C" const fusednorm_plugin* fusednorm_plugin_entry_hip(void);
#endif

namespace fusednorm {
namespace {

const char* backend_name(int32_t device_type) { return device_type == kDLCUDA ? "cuda" : "hip"; }

// Directory of libfusednorm.so itself (dladdr of a function in it), with a trailing '/'.
std::string own_directory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// Checks a plugin's table against this build, then starts its runtime.
bool adopt(const fusednorm_plugin* t, int32_t device_type, const std::string& where, PluginState* st) {
  char msg[512] = "";
  if (t == nullptr) {
    st->error += where + ": the entry point returned NULL";
    return false;
  }
  if (t->abi_version != FUSEDNORM_PLUGIN_ABI_VERSION || t->struct_size != sizeof(fusednorm_plugin) ||
      t->cast_call_size != sizeof(CastCall) || t->rmsnorm_call_size != sizeof(RmsnormQuantCall) ||
      t->mla_call_size != sizeof(MlaCall)) {
    // The sizes too: a plugin of the same version built against other call structs is refused.
    auto sizes = [](uint32_t table, uint32_t cast, uint32_t rmsnorm) {
      return " (table " + std::to_string(table) + " bytes, calls " + std::to_string(cast) + "/" +
             std::to_string(rmsnorm) + " bytes)";
    };
    st->error += where + ": plugin ABI version " + std::to_string(t->abi_version) +
                 sizes(t->struct_size, t->cast_call_size, t->rmsnorm_call_size) +
                 ", this libfusednorm expects version " + std::to_string(FUSEDNORM_PLUGIN_ABI_VERSION) +
                 sizes(sizeof(fusednorm_plugin), sizeof(CastCall), sizeof(RmsnormQuantCall));
    return false;
  }
  if (t->qk_call_size != sizeof(QkRmsnormCall)) {  // qk_rmsnorm's call (the table's size matched)
    st->error += where + ": plugin's qk_rmsnorm call is " + std::to_string(t->qk_call_size) +
                 " bytes, this libfusednorm's " + std::to_string(sizeof(QkRmsnormCall));
    return false;
  }
  if (t->device_type != device_type) {
    st->error += where + ": plugin serves device type " + std::to_string(t->device_type);
    return false;
  }
  if (t->init(msg, sizeof msg) != FUSEDNORM_SUCCESS) {
    st->error += where + ": " + msg;
    return false;
  }
  st->table = t;
  st->error.clear();
  return true;
}

void load(int32_t device_type, PluginState* st) {
  const std::string file = plugin_file_name(device_type);
  const std::string entry = std::string("fusednorm_plugin_entry_") + backend_name(device_type);
#if defined(FUSEDNORM_STATIC_CUDA)
  if (device_type == kDLCUDA) {
    adopt(fusednorm_plugin_entry_cuda(), device_type, "linked-in cuda backend", st);
    return;
  }
#endif
#if defined(FUSEDNORM_STATIC_HIP)
  if (device_type == kDLROCM) {
    adopt(fusednorm_plugin_entry_hip(), device_type, "linked-in hip backend", st);
    return;
  }
#endif
  std::vector<std::string> candidates;
  if (const char* dir = getenv("FUSEDNORM_PLUGIN_DIR"); dir != nullptr && *dir != '\0')
    candidates.push_back(std::string(dir) + "/" + file);
  const std::string own = own_directory();
  if (!own.empty()) candidates.push_back(own + file);
  candidates.push_back(file);  // the dynamic loader's search path
  st->error = std::string("the ") + (device_type == kDLCUDA ? "CUDA" : "HIP") + " backend is unavailable: no usable " +
              file + ": ";
  for (const std::string& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      st->error += std::string(e ? e : path + ": dlopen failed") + "; ";
      continue;
    }
    auto fn = reinterpret_cast<fusednorm_plugin_entry_fn>(dlsym(handle, entry.c_str()));
    if (fn == nullptr) {
      st->error += path + ": no symbol " + entry + "; ";
      continue;  // never dlclose: a plugin's static state may be referenced
    }
    // Found the plugin: its verdict (ABI, runtime, driver, device) is final.
    st->error = std::string("the ") + (device_type == kDLCUDA ? "CUDA" : "HIP") + " backend is unavailable: ";
    adopt(fn(), device_type, path, st);
    return;
  }
  st->error.resize(st->error.size() - 2);  // the last attempt's "; "
}

}  // namespace

const char* plugin_file_name(int32_t device_type) {
  return device_type == kDLCUDA ? "libfusednorm_cuda.so" : "libfusednorm_hip.so";
}

const PluginState& plugin_for(int32_t device_type) {
  static std::once_flag once[3];
  static PluginState state[3];
  const int i = device_type == kDLCPU ? 0 : device_type == kDLCUDA ? 1 : 2;
  std::call_once(once[i], [&] {
    if (device_type == kDLCPU) adopt(fusednorm_plugin_entry_cpu(), kDLCPU, "linked-in cpu backend", &state[i]);
    else load(device_type, &state[i]);
  });
  return state[i];
}

}  // namespace fusednorm
