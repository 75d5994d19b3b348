// The plugin loader's tests (label "plugin"), one scenario per process: libfusednorm loads a GPU
// plugin once per process, so ctest runs this probe once per scenario, each with its own
// FUSEDNORM_PLUGIN_DIR (tests/CMakeLists.txt).
//
//   fusednorm_plugin_probe LIBFUSEDNORM SCENARIO
//
// LIBFUSEDNORM is dlopen()ed by path (the probe does not link it, so the copy under test is the
// only one in the process and its own directory is the one the loader searches). SCENARIO:
//   missing       no libfusednorm_cuda.so in FUSEDNORM_PLUGIN_DIR (if set), beside LIBFUSEDNORM, or
//                 on the loader's path: the query and a call report every attempt's dlerror text
//   abi           the plugin in FUSEDNORM_PLUGIN_DIR has another ABI version: refused, init not run
//   call_size     its version is right but its RmsnormQuantCall is larger: refused, sizes named
//   init_fails    its init reports "no device": BACKEND_UNAVAILABLE with that text
//   device_error  its init succeeds (1 device) and rmsnorm_quant fails: DEVICE_ERROR, its message
//                 passed through; the call it received matches the one made
//   cuda_nodevice the real libfusednorm_cuda.so beside LIBFUSEDNORM, on a machine without a usable
//                 GPU: BACKEND_UNAVAILABLE with the CUDA runtime's text. Prints FUSEDNORM_SKIP
//                 (ctest: skipped) where the backend is available.
// Every scenario then checks that the CPU path still works in the same process.
// Exit status 0 = pass (or skip), 1 = a check failed, 2 = bad usage or setup.
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "core/plugin_abi.h"
#include "fusednorm/fusednorm.h"

namespace {

int g_failures = 0;

#define PROBE_CHECK(cond, ...)                                             \
  do {                                                                     \
    if (!(cond)) {                                                         \
      ++g_failures;                                                        \
      fprintf(stderr, "FAILED %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

const char kPluginFile[] = "libfusednorm_cuda.so";

// The C API, resolved from the dlopen()ed library.
struct Api {
  decltype(&fusednorm_query_backend) query_backend;
  decltype(&fusednorm_rmsnorm_quant) rmsnorm_quant;
  decltype(&fusednorm_rmsnorm_quant_options_init) rmsnorm_quant_options_init;
  decltype(&fusednorm_cast) cast;
  decltype(&fusednorm_last_error) last_error;
  decltype(&fusednorm_status_string) status_string;
};

template <class F>
bool resolve(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) fprintf(stderr, "setup: no symbol %s in the library\n", name);
  return *fn != nullptr;
}

// The text dlopen() gives for `path` in this process (the loader's text for the same attempt);
// "" if it loads (then it stays loaded: the caller reports a setup problem or skips).
std::string dlopen_error(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) return "";
  const char* e = dlerror();
  return e ? e : "";
}

std::string dirname_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string plugin_dir_env() {
  const char* d = getenv("FUSEDNORM_PLUGIN_DIR");
  return d ? d : "";
}

// The fake plugin's count of init calls (it is loaded already, by libfusednorm).
int fake_init_calls(const std::string& plugin_path) {
  void* h = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return -1;
  const int* calls = static_cast<const int*>(dlsym(h, "fusednorm_fake_init_calls"));
  const int n = calls ? *calls : -2;
  dlclose(h);  // drops the reference RTLD_NOLOAD took; libfusednorm's stays
  return n;
}

// A small rmsnorm_quant call: input [2, 8] f32, weight [8] f32, output int8, one f32 scale per
// row. On a GPU device the pointers are never dereferenced by the core (nor by the fake plugin).
struct Call {
  static constexpr int64_t kRows = 2, kH = 8;
  float in[kRows * kH], w[kH], scale[kRows];
  int8_t out[kRows * kH];
  int64_t in_shape[2] = {kRows, kH}, w_shape[1] = {kH}, s_shape[2] = {kRows, 1};
  DLTensor input{}, weight{}, output{}, scales{};

  Call(int32_t device_type, int32_t device_id) {
    for (int64_t i = 0; i < kRows * kH; ++i) in[i] = 1.0f, out[i] = 0;
    for (int64_t i = 0; i < kH; ++i) w[i] = 1.0f;
    for (int64_t r = 0; r < kRows; ++r) scale[r] = -1.0f;
    const DLDevice dev{static_cast<DLDeviceType>(device_type), device_id};
    input = DLTensor{in, dev, 2, DLDataType{kDLFloat, 32, 1}, in_shape, nullptr, 0};
    weight = DLTensor{w, dev, 1, DLDataType{kDLFloat, 32, 1}, w_shape, nullptr, 0};
    output = DLTensor{out, dev, 2, DLDataType{kDLInt, 8, 1}, in_shape, nullptr, 0};
    scales = DLTensor{scale, dev, 2, DLDataType{kDLFloat, 32, 1}, s_shape, nullptr, 0};
  }
  fusednorm_status run(const Api& api, void* stream) {
    fusednorm_rmsnorm_quant_options o;
    api.rmsnorm_quant_options_init(&o);
    return api.rmsnorm_quant(&input, nullptr, &weight, &output, &scales, &o, stream);
  }
};

// The CPU backend still works after the GPU one failed to load or failed a call.
void check_cpu_still_works(const Api& api) {
  Call c(kDLCPU, 0);
  const fusednorm_status st = c.run(api, nullptr);
  PROBE_CHECK(st == FUSEDNORM_SUCCESS, "CPU rmsnorm_quant: %s: %s", api.status_string(st), api.last_error());
  for (int64_t i = 0; i < Call::kRows * Call::kH; ++i)
    PROBE_CHECK(c.out[i] == 127, "CPU output[%lld] = %d, expected 127", (long long)i, int(c.out[i]));
  for (int64_t r = 0; r < Call::kRows; ++r)
    PROBE_CHECK(fabsf(c.scale[r] - 1.0f / 127) < 1e-6f, "CPU scale[%lld] = %g, expected ~1/127", (long long)r,
                double(c.scale[r]));
  fusednorm_backend_info info{};
  info.struct_size = sizeof info;
  PROBE_CHECK(api.query_backend(kDLCPU, &info) == FUSEDNORM_SUCCESS && info.available == 1,
              "CPU query: available = %d", int(info.available));
}

fusednorm_backend_info query_cuda(const Api& api) {
  fusednorm_backend_info info{};
  info.struct_size = sizeof info;
  const fusednorm_status st = api.query_backend(kDLCUDA, &info);
  PROBE_CHECK(st == FUSEDNORM_SUCCESS, "query_backend(kDLCUDA): %s: %s", api.status_string(st), api.last_error());
  printf("query_backend(kDLCUDA): available=%d device_count=%d detail: %s\n", int(info.available),
         int(info.device_count), info.detail);
  return info;
}

// An unavailable backend: the query says so with the loader's text, and a call on cuda:0 fails
// with BACKEND_UNAVAILABLE and the same text. Returns that text (the call's, untruncated).
std::string check_unavailable(const Api& api) {
  const fusednorm_backend_info info = query_cuda(api);
  PROBE_CHECK(info.available == 0 && info.device_count == 0, "available = %d, device_count = %d",
              int(info.available), int(info.device_count));
  PROBE_CHECK(strcmp(info.name, "cuda") == 0, "name = '%s'", info.name);
  Call c(kDLCUDA, 0);
  const fusednorm_status st = c.run(api, nullptr);
  const std::string msg = api.last_error();
  printf("rmsnorm_quant on cuda:0: %s: %s\n", api.status_string(st), msg.c_str());
  PROBE_CHECK(st == FUSEDNORM_BACKEND_UNAVAILABLE, "status %s", api.status_string(st));
  const std::string prefix = "device cuda:0: ";
  PROBE_CHECK(starts_with(msg, prefix), "message: %s", msg.c_str());
  const std::string error = starts_with(msg, prefix) ? msg.substr(prefix.size()) : msg;
  // The query's detail is the same text, cut to its 512 bytes.
  PROBE_CHECK(strlen(info.detail) > 0 && starts_with(error, info.detail), "detail '%s' vs message '%s'", info.detail,
              error.c_str());
  // A second call gives the same answer (loaded once, the verdict kept).
  Call again(kDLCUDA, 0);
  const fusednorm_status st2 = again.run(api, nullptr);
  PROBE_CHECK(st2 == st && msg == api.last_error(), "second call: %s: %s", api.status_string(st2), api.last_error());
  return error;
}

int missing(const Api& api, const std::string& lib_path) {
  // The attempts the loader makes, in order, and the dlerror text of each in this process.
  std::vector<std::string> attempts;
  if (!plugin_dir_env().empty()) attempts.push_back(plugin_dir_env() + "/" + kPluginFile);
  attempts.push_back(dirname_of(lib_path) + kPluginFile);
  attempts.push_back(kPluginFile);
  std::vector<std::string> errors;
  for (const std::string& a : attempts) {
    errors.push_back(dlopen_error(a));
    if (errors.back().empty()) {
      if (a == kPluginFile) {  // an installed plugin on the loader's path: not this test's setup
        printf("FUSEDNORM_SKIP: a %s is on the dynamic loader's path; the 'missing' case cannot be set up\n",
               kPluginFile);
        return 0;
      }
      fprintf(stderr, "setup: %s exists; this scenario needs it absent\n", a.c_str());
      return 2;
    }
  }
  const std::string error = check_unavailable(api);
  const std::string head = std::string("the CUDA backend is unavailable: no usable ") + kPluginFile + ": ";
  PROBE_CHECK(starts_with(error, head), "error '%s' should start with '%s'", error.c_str(), head.c_str());
  // Every attempt listed, in order, with the loader's own text.
  size_t at = 0;
  for (const std::string& e : errors) {
    const size_t pos = error.find(e, at);
    PROBE_CHECK(pos != std::string::npos, "error '%s' should list '%s' (after offset %zu)", error.c_str(), e.c_str(),
                at);
    if (pos != std::string::npos) at = pos + e.size();
  }
  // The detail names the file and the first attempt's dlerror text.
  fusednorm_backend_info info = query_cuda(api);
  PROBE_CHECK(contains(info.detail, kPluginFile), "detail does not name %s", kPluginFile);
  PROBE_CHECK(contains(info.detail, errors.front()), "detail does not hold '%s'", errors.front().c_str());
  return 0;
}

int abi(const Api& api) {
  const std::string plugin = plugin_dir_env() + "/" + kPluginFile;
  const std::string error = check_unavailable(api);
  const std::string want = plugin + ": plugin ABI version " + std::to_string(FUSEDNORM_PLUGIN_ABI_VERSION + 1);
  PROBE_CHECK(contains(error, want), "error '%s' should hold '%s'", error.c_str(), want.c_str());
  const std::string expects = "expects version " + std::to_string(FUSEDNORM_PLUGIN_ABI_VERSION);
  PROBE_CHECK(contains(error, expects), "error '%s' should hold '%s'", error.c_str(), expects.c_str());
  const int calls = fake_init_calls(plugin);
  PROBE_CHECK(calls == 0, "the refused plugin's init ran %d time(s) (-1: not loaded)", calls);
  return 0;
}

int call_size(const Api& api) {
  const std::string plugin = plugin_dir_env() + "/" + kPluginFile;
  const std::string error = check_unavailable(api);
  const std::string cast = std::to_string(sizeof(fusednorm::CastCall)) + "/";
  const std::string theirs = "calls " + cast + std::to_string(sizeof(fusednorm::RmsnormQuantCall) + 8) + " bytes";
  const std::string ours = "calls " + cast + std::to_string(sizeof(fusednorm::RmsnormQuantCall)) + " bytes";
  const std::string want = plugin + ": plugin ABI version " + std::to_string(FUSEDNORM_PLUGIN_ABI_VERSION);
  PROBE_CHECK(contains(error, want), "error '%s' should hold '%s'", error.c_str(), want.c_str());
  PROBE_CHECK(contains(error, theirs) && contains(error, ours) && error.find(theirs) < error.find(ours),
              "error '%s' should name the plugin's '%s' and this build's '%s'", error.c_str(), theirs.c_str(),
              ours.c_str());
  const int calls = fake_init_calls(plugin);
  PROBE_CHECK(calls == 0, "the refused plugin's init ran %d time(s) (-1: not loaded)", calls);
  return 0;
}

int init_fails(const Api& api) {
  const std::string plugin = plugin_dir_env() + "/" + kPluginFile;
  const std::string error = check_unavailable(api);
  const std::string want = "the CUDA backend is unavailable: " + plugin +
                           ": CUDA runtime: error 100 (cudaErrorNoDevice): no CUDA-capable device is detected";
  PROBE_CHECK(error == want, "error '%s'\n  expected '%s'", error.c_str(), want.c_str());
  const int calls = fake_init_calls(plugin);
  PROBE_CHECK(calls == 1, "init ran %d time(s), expected once", calls);
  return 0;
}

int device_error(const Api& api) {
  const std::string plugin = plugin_dir_env() + "/" + kPluginFile;
  const fusednorm_backend_info info = query_cuda(api);
  PROBE_CHECK(info.available == 1 && info.device_count == 1, "available = %d, device_count = %d",
              int(info.available), int(info.device_count));
  PROBE_CHECK(strcmp(info.detail, "fake device 0") == 0, "detail '%s'", info.detail);

  // The call reaches the plugin's rmsnorm_quant with the validated call, device and stream.
  void* const stream = reinterpret_cast<void*>(uintptr_t(0x5eed));
  Call c(kDLCUDA, 0);
  fusednorm_status st = c.run(api, stream);
  std::string msg = api.last_error();
  printf("rmsnorm_quant on cuda:0: %s: %s\n", api.status_string(st), msg.c_str());
  PROBE_CHECK(st == FUSEDNORM_DEVICE_ERROR, "status %s", api.status_string(st));
  char want[256];
  snprintf(want, sizeof want,
           "device cuda:0: fake CUDA error 700 (cudaErrorIllegalAddress): h=%lld rows=%lld device=0 stream=%p",
           (long long)Call::kH, (long long)Call::kRows, stream);
  PROBE_CHECK(msg == want, "message '%s'\n  expected '%s'", msg.c_str(), want);

  // A device the plugin does not have.
  Call c1(kDLCUDA, 1);
  st = c1.run(api, nullptr);
  msg = api.last_error();
  PROBE_CHECK(st == FUSEDNORM_BACKEND_UNAVAILABLE && contains(msg, "device cuda:1") && contains(msg, "1 device(s)"),
              "cuda:1: %s: %s", api.status_string(st), msg.c_str());

  // An entry the plugin leaves NULL (cast): UNSUPPORTED, nothing called.
  Call cast(kDLCUDA, 0);
  st = api.cast(&cast.input, &cast.output, nullptr, nullptr);
  msg = api.last_error();
  PROBE_CHECK(st == FUSEDNORM_UNSUPPORTED && contains(msg, "does not implement"), "cast on cuda:0: %s: %s",
              api.status_string(st), msg.c_str());

  const int calls = fake_init_calls(plugin);
  PROBE_CHECK(calls == 1, "init ran %d time(s), expected once", calls);
  return 0;
}

int cuda_nodevice(const Api& api, const std::string& lib_path) {
  const fusednorm_backend_info info = query_cuda(api);
  if (info.available) {
    printf("FUSEDNORM_SKIP: the CUDA backend is available here (%s)\n", info.detail);
    return 0;
  }
  const std::string error = check_unavailable(api);
  // Found and loaded: the verdict is the plugin's (the CUDA runtime's text), not the loader's.
  PROBE_CHECK(!contains(error, "no usable"), "the CUDA plugin was not found or not loadable: %s", error.c_str());
  PROBE_CHECK(contains(error, "CUDA runtime: "), "error '%s' should hold the CUDA runtime's text", error.c_str());
#if !defined(PROBE_STATIC_CUDA)
  const std::string where = dirname_of(lib_path) + kPluginFile + ": CUDA runtime: ";
  PROBE_CHECK(contains(error, where), "error '%s' should name '%s'", error.c_str(), where.c_str());
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBFUSEDNORM missing|abi|call_size|init_fails|device_error|cuda_nodevice\n", argv[0]);
    return 2;
  }
  const std::string lib_path = argv[1], scenario = argv[2];
  printf("scenario %s, library %s, FUSEDNORM_PLUGIN_DIR='%s'\n", scenario.c_str(), lib_path.c_str(),
         plugin_dir_env().c_str());
  void* lib = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "setup: dlopen(%s): %s\n", lib_path.c_str(), dlerror());
    return 2;
  }
  Api api{};
  if (!resolve(lib, "fusednorm_query_backend", &api.query_backend) ||
      !resolve(lib, "fusednorm_rmsnorm_quant", &api.rmsnorm_quant) ||
      !resolve(lib, "fusednorm_rmsnorm_quant_options_init", &api.rmsnorm_quant_options_init) ||
      !resolve(lib, "fusednorm_cast", &api.cast) || !resolve(lib, "fusednorm_last_error", &api.last_error) ||
      !resolve(lib, "fusednorm_status_string", &api.status_string))
    return 2;
  const bool needs_dir =
      scenario == "abi" || scenario == "call_size" || scenario == "init_fails" || scenario == "device_error";
  if (needs_dir && plugin_dir_env().empty()) {
    fprintf(stderr, "setup: scenario %s needs FUSEDNORM_PLUGIN_DIR\n", scenario.c_str());
    return 2;
  }

  int rc;
  if (scenario == "missing") rc = missing(api, lib_path);
  else if (scenario == "abi") rc = abi(api);
  else if (scenario == "call_size") rc = call_size(api);
  else if (scenario == "init_fails") rc = init_fails(api);
  else if (scenario == "device_error") rc = device_error(api);
  else if (scenario == "cuda_nodevice") rc = cuda_nodevice(api, lib_path);
  else {
    fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  if (rc != 0) return rc;
  check_cpu_still_works(api);
  if (g_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("passed\n");
  return 0;
}
