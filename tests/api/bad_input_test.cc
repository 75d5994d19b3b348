// Bad input (product.md, "Bad input"): every invalid call returns INVALID_ARGUMENT or
// UNSUPPORTED (BACKEND_UNAVAILABLE for a GPU device without a backend) with a message naming the
// argument and the values, and writes nothing: every byte of every tensor's allocation (guard
// bytes included) is compared with a copy taken before the call.
//
// Each rejected call runs in a forked child, so that a call the validation wrongly lets through
// (and that then crashes or hangs in a kernel on a wild pointer or a 2^62-row tensor) fails its
// own test instead of taking the whole binary down. FUSEDNORM_TEST_NO_FORK=1 runs them in-process
// (for a debugger).
//
// Each family also has positive controls (valid calls succeed and equal the scalar reference
// byte for byte), so that a validation rejecting everything would be noticed.
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/test_tensor.h"
#include "fusednorm/fusednorm.h"
#include "fusednorm/fusednorm.hpp"
#include "reference/reference.h"

namespace fusednorm {
namespace test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kHuge = INT64_MAX / 2;        // 4611686018427387903 rows
constexpr int64_t kHugeStride = INT64_MAX / 4;  // elements between rows
constexpr uint64_t kWildOffset = uint64_t(1) << 63;  // byte_offset that overflows int64 offsets

// ---------------------------------------------------------------- tensors of one call

// The tensor arguments of one call: owning HostTensors (poisoned with 0xA5 around and inside) and
// the DLTensors actually passed, which start as views of them and which tests edit freely
// (shape, strides, dtype, device, data, byte_offset). A slot can be passed as NULL.
class Args {
 public:
  explicit Args(std::vector<const char*> names)
      : names_(std::move(names)), t_(names_.size()), dl_(names_.size()), null_(names_.size(), false) {}
  virtual ~Args() = default;

  // (Re)allocates slot s and fills it with finite values if it is an input-like dtype.
  void make(int s, DType type, std::vector<int64_t> shape, int64_t row_pad = 0, int misalign = 0) {
    t_[size_t(s)] = std::make_unique<HostTensor>(type, std::move(shape), row_pad, misalign);
    fill(s);
    dl_[size_t(s)] = *t_[size_t(s)]->dl();
    null_[size_t(s)] = false;
  }
  HostTensor& tensor(int s) { return *t_[size_t(s)]; }
  DLTensor& dl(int s) { return dl_[size_t(s)]; }
  DLTensor* ptr(int s) { return null_[size_t(s)] ? nullptr : &dl_[size_t(s)]; }
  void set_null(int s) { null_[size_t(s)] = true; }
  void set_device(int s, int32_t type, int32_t id) { dl_[size_t(s)].device = DLDevice{DLDeviceType(type), id}; }
  void set_all_devices(int32_t type, int32_t id) {
    for (size_t s = 0; s < dl_.size(); ++s) set_device(int(s), type, id);
  }

  // Copies every allocation; changes() then names the first byte that differs.
  void snapshot() {
    before_.clear();
    for (const auto& t : t_) before_.push_back(t ? t->storage() : std::vector<uint8_t>());
  }
  std::string changes() const {
    for (size_t s = 0; s < t_.size(); ++s) {
      if (!t_[s]) continue;
      const auto& now = t_[s]->storage();
      const auto& was = before_[s];
      if (now.size() != was.size()) return std::string(names_[s]) + ": allocation resized";
      for (size_t i = 0; i < now.size(); ++i)
        if (now[i] != was[i]) {
          char buf[160];
          snprintf(buf, sizeof buf, "%s: byte %zu of its allocation changed from 0x%02x to 0x%02x", names_[s], i,
                   unsigned(was[i]), unsigned(now[i]));
          return buf;
        }
    }
    return "";
  }

  virtual fusednorm_status call() = 0;
  virtual fusednorm_status call_reference() = 0;

 protected:
  void fill(int s) {
    HostTensor& t = *t_[size_t(s)];
    if (!is_input_dtype(t.type())) return;
    std::mt19937 rng(1234u + unsigned(s));
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    for (int64_t r = 0; r < t.rows(); ++r)
      for (int64_t i = 0; i < t.cols(); ++i) t.set(r, i, dist(rng));
  }

  std::vector<const char*> names_;
  std::vector<std::unique_ptr<HostTensor>> t_;
  std::vector<DLTensor> dl_;
  std::vector<bool> null_;
  std::vector<std::vector<uint8_t>> before_;
};

enum { kIn, kRes, kW, kOut, kSc };

// fusednorm_rmsnorm_quant: bf16 input/residual/weight [4, 64], f8e4m3fn output, f32 per-row
// scales [4, 1], default options (dynamic per row, RMS). A valid call as built.
class Rq : public Args {
 public:
  explicit Rq(int64_t rows = 4, int64_t h = 64, DType in_type = DType::kBF16)
      : Args({"input", "residual", "weight", "output", "scales"}) {
    fusednorm_rmsnorm_quant_options_init(&opts);
    make(kIn, in_type, {rows, h});
    make(kRes, in_type, {rows, h});
    make(kW, in_type, {h});
    make(kOut, DType::k_f8e4m3fn, {rows, h});
    make(kSc, DType::kF32, {rows, 1});
  }
  void use_static_scale(float s = 0.05f) {
    opts.scale_mode = FUSEDNORM_SCALE_STATIC;
    make(kSc, DType::kF32, {1});
    tensor(kSc).set(0, 0, s);
  }
  void use_groups(int64_t group, DType scale_type = DType::kF32) {
    opts.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    opts.group_size = group;
    const auto& sh = tensor(kIn).shape();
    make(kSc, scale_type, {sh[0], sh[1] / group});
  }
  void use_packed() {
    opts.scale_placement = FUSEDNORM_SCALES_PACKED_ROW_END;
    const auto& sh = tensor(kIn).shape();
    make(kOut, DType::k_f8e4m3fn, {sh[0], sh[1] + 4});
    set_null(kSc);
  }
  const fusednorm_rmsnorm_quant_options* options() { return null_opts ? nullptr : &opts; }
  fusednorm_status call() override {
    return fusednorm_rmsnorm_quant(ptr(kIn), ptr(kRes), ptr(kW), ptr(kOut), ptr(kSc), options(), nullptr);
  }
  fusednorm_status call_reference() override {
    return reference::rmsnorm_quant(ptr(kIn), ptr(kRes), ptr(kW), ptr(kOut), ptr(kSc), options());
  }

  fusednorm_rmsnorm_quant_options opts;
  bool null_opts = false;
};

enum { kSrc, kDst };

// fusednorm_cast: f32 [4, 64] -> f8e4m3fn [4, 64], default options. A valid call as built.
class Cast : public Args {
 public:
  explicit Cast(DType src = DType::kF32, DType dst = DType::k_f8e4m3fn, std::vector<int64_t> shape = {4, 64})
      : Args({"src", "dst"}) {
    fusednorm_cast_options_init(&opts);
    make(kSrc, src, shape);
    make(kDst, dst, shape);
  }
  const fusednorm_cast_options* options() { return null_opts ? nullptr : &opts; }
  fusednorm_status call() override { return fusednorm_cast(ptr(kSrc), ptr(kDst), options(), nullptr); }
  fusednorm_status call_reference() override { return reference::cast(ptr(kSrc), ptr(kDst), options()); }

  fusednorm_cast_options opts;
  bool null_opts = false;
};

// ---------------------------------------------------------------- running a call that must fail

struct Outcome {
  int signal = 0;         // the child died of this signal (the call crashed or hung)
  bool reported = false;  // the child sent its report
  int32_t status = -1;
  std::string message;    // fusednorm_last_error() after the call
  std::string changes;    // "" when no byte of any allocation changed
};

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = write(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

void write_string(int fd, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  write_all(fd, &n, sizeof n);
  write_all(fd, s.data(), n);
}

bool read_string(const std::string& buf, size_t* pos, std::string* out) {
  uint32_t n;
  if (*pos + sizeof n > buf.size()) return false;
  memcpy(&n, buf.data() + *pos, sizeof n);
  *pos += sizeof n;
  if (*pos + n > buf.size()) return false;
  out->assign(buf.data() + *pos, n);
  *pos += n;
  return true;
}

// Snapshots the allocations, makes the call (in a forked child unless FUSEDNORM_TEST_NO_FORK),
// and reports its status, message and whether anything was written.
Outcome run_call(Args& args) {
  args.snapshot();
  Outcome o;
  const char* no_fork = getenv("FUSEDNORM_TEST_NO_FORK");
  if (no_fork != nullptr && no_fork[0] == '1') {
    o.status = args.call();
    o.message = fusednorm_last_error();
    o.changes = args.changes();
    o.reported = true;
    return o;
  }
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    // Die of the signal itself (Catch2's fatal-signal handlers would report in the child too).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM}) signal(sig, SIG_DFL);
    alarm(60);  // a call wrongly accepted on a 2^62-row tensor would run "forever"
    const int32_t st = args.call();
    const std::string msg = fusednorm_last_error();
    const std::string ch = args.changes();
    write_all(fds[1], &st, sizeof st);
    write_string(fds[1], msg);
    write_string(fds[1], ch);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  char chunk[4096];
  for (;;) {
    const ssize_t k = read(fds[0], chunk, sizeof chunk);
    if (k <= 0) break;
    buf.append(chunk, size_t(k));
  }
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (WIFSIGNALED(wstatus)) o.signal = WTERMSIG(wstatus);
  size_t pos = 0;
  if (buf.size() >= sizeof o.status) {
    memcpy(&o.status, buf.data(), sizeof o.status);
    pos = sizeof o.status;
    o.reported = read_string(buf, &pos, &o.message) && read_string(buf, &pos, &o.changes);
  }
  return o;
}

std::string status_name(int32_t st) { return fusednorm_status_string(fusednorm_status(st)); }

// One expected substring, or a set of alternatives (any one of them).
struct Part {
  Part(const char* s) : alts{s} {}  // NOLINT: implicit on purpose
  Part(std::initializer_list<const char*> a) : alts(a.begin(), a.end()) {}
  std::vector<std::string> alts;
};

void check_rejected(Args& args, fusednorm_status want, std::initializer_list<Part> parts, const char* file,
                    int line) {
  const Outcome o = run_call(args);
  INFO("call at " << file << ":" << line);
  INFO("fusednorm_last_error(): \"" << o.message << "\"");
  if (o.signal != 0) {
    FAIL("the call " << (o.signal == SIGALRM ? "hung" : "crashed") << " (signal " << o.signal << ", "
                     << strsignal(o.signal)
                     << "): the validation let it through and a kernel ran on it");
  }
  REQUIRE(o.reported);
  CHECK(status_name(o.status) == status_name(want));
  for (const Part& p : parts) {
    bool found = false;
    for (const auto& a : p.alts) found = found || o.message.find(a) != std::string::npos;
    if (p.alts.size() == 1) {
      CHECK_THAT(o.message, Catch::Contains(p.alts[0]));
    } else {
      INFO("expected one of the alternatives starting with \"" << p.alts[0] << "\"");
      CHECK(found);
    }
  }
  INFO("writes nothing: " << (o.changes.empty() ? "nothing changed" : o.changes));
  CHECK(o.changes.empty());
}

#define CHECK_REJECTED(args, status, ...) check_rejected((args), (status), {__VA_ARGS__}, __FILE__, __LINE__)

// Runs the call on `a` with the library and on `b` (set up identically) with the scalar reference;
// both succeed and every data byte of every tensor is equal; no guard byte is written.
void check_matches_reference(Args& a, Args& b, size_t slots) {
  const fusednorm_status st = a.call();
  INFO("fusednorm_last_error(): \"" << fusednorm_last_error() << "\"");
  REQUIRE(status_name(st) == "SUCCESS");
  REQUIRE(status_name(b.call_reference()) == "SUCCESS");
  for (size_t s = 0; s < slots; ++s) {
    if (a.ptr(int(s)) == nullptr) continue;
    HostTensor& ta = a.tensor(int(s));
    HostTensor& tb = b.tensor(int(s));
    INFO("slot " << s);
    REQUIRE(ta.data_bytes() == tb.data_bytes());
    CHECK(memcmp(ta.data_begin(), tb.data_begin(), ta.data_bytes()) == 0);
    // Guard bytes before and after the data are still poison.
    const uint8_t* base = ta.storage().data();
    const size_t begin = size_t(ta.data_begin() - base), end = begin + ta.data_bytes();
    size_t touched = 0;
    for (size_t i = 0; i < ta.storage().size(); ++i)
      if ((i < begin || i >= end) && base[i] != 0xA5) ++touched;
    CHECK(touched == 0);
  }
}

template <class Setup>
void rq_control(Setup&& setup) {
  Rq a, b;
  setup(a);
  setup(b);
  check_matches_reference(a, b, 5);
}

template <class Setup>
void cast_control(DType src, DType dst, std::vector<int64_t> shape, Setup&& setup) {
  Cast a(src, dst, shape), b(src, dst, shape);
  setup(a);
  setup(b);
  check_matches_reference(a, b, 2);
}

}  // namespace

// ================================================================ rmsnorm_quant

TEST_CASE("rmsnorm_quant: valid calls succeed and equal the reference (positive control)", "[bad_input][rmsnorm_quant]") {
  SECTION("dynamic per-row, with residual") { rq_control([](Rq&) {}); }
  SECTION("the harness sees writes: a valid call through run_call reports changed output bytes") {
    Rq c;
    c.set_null(kRes);
    const Outcome o = run_call(c);
    REQUIRE(o.signal == 0);
    REQUIRE(o.reported);
    CHECK(status_name(o.status) == "SUCCESS");
    CHECK_THAT(o.changes, Catch::StartsWith("output: byte"));
  }
  SECTION("no residual, options NULL") {
    rq_control([](Rq& c) {
      c.set_null(kRes);
      c.null_opts = true;
    });
  }
  SECTION("f32 input, int8 output, qmax at the format's max (127)") {
    auto setup = [](Rq& c) {
      for (int s : {kIn, kRes, kW}) c.make(s, DType::kF32, s == kW ? std::vector<int64_t>{64} : std::vector<int64_t>{4, 64});
      c.make(kOut, DType::kI8, {4, 64});
      c.opts.qmax = 127.0f;
    };
    rq_control(setup);
  }
  SECTION("every FP8 output format with qmax at its max (448, 240, 240, 57344, 57344)") {
    const std::pair<DType, float> fmts[] = {{DType::k_f8e4m3fn, 448.0f}, {DType::k_f8e4m3fnuz, 240.0f},
                                            {DType::k_f8e4m3, 240.0f}, {DType::k_f8e5m2, 57344.0f},
                                            {DType::k_f8e5m2fnuz, 57344.0f}};
    for (const auto& f : fmts) {
      INFO(dtype_name(f.first));
      rq_control([&](Rq& c) {
        c.make(kOut, f.first, {4, 64});
        c.opts.qmax = f.second;
      });
    }
  }
  SECTION("dynamic groups of 32, 64 and 128 with f32, f16, bf16 and e8m0 scales") {
    for (int64_t g : {32, 64, 128})
      for (DType st : {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0}) {
        INFO("group " << g << ", scales " << dtype_name(st));
        rq_control([&](Rq& c) {
          for (int s : {kIn, kRes}) c.make(s, DType::kBF16, {4, 256});
          c.make(kW, DType::kBF16, {256});
          c.make(kOut, DType::k_f8e4m3fn, {4, 256});
          c.use_groups(g, st);
        });
      }
  }
  SECTION("column-major group scales (shape [4, 2], strides {1, 4})") {
    static int64_t strides[] = {1, 4};
    rq_control([](Rq& c) {
      c.use_groups(32);
      c.make(kSc, DType::kF32, {2, 4});  // storage for 8 scales
      static int64_t shape[] = {4, 2};
      c.dl(kSc).shape = shape;
      c.dl(kSc).strides = strides;
    });
  }
  SECTION("static scale") { rq_control([](Rq& c) { c.use_static_scale(); }); }
  SECTION("packed row end") { rq_control([](Rq& c) { c.use_packed(); }); }
  SECTION("norm NONE with weight NULL") {
    rq_control([](Rq& c) {
      c.opts.norm = FUSEDNORM_NORM_NONE;
      c.set_null(kW);
    });
  }
  SECTION("boundary options: eps 0, min_scale 0, tiny scale_ub, group_size ignored outside groups") {
    rq_control([](Rq& c) {
      c.opts.eps = 0.0f;
      c.opts.min_scale = 0.0f;
      c.opts.scale_ub = 1e-30f;
      c.opts.group_size = 48;  // only DYNAMIC_GROUP reads it
    });
  }
  SECTION("a larger struct_size (a newer caller) is accepted") {
    struct Bigger {
      fusednorm_rmsnorm_quant_options o;
      char future[32];
    };
    Rq a;
    Bigger big{};
    fusednorm_rmsnorm_quant_options_init(&big.o);
    big.o.struct_size = sizeof big;
    REQUIRE(fusednorm_rmsnorm_quant(a.ptr(kIn), a.ptr(kRes), a.ptr(kW), a.ptr(kOut), a.ptr(kSc), &big.o, nullptr) ==
            FUSEDNORM_SUCCESS);
  }
  SECTION("rank 9 (8 leading dimensions)") {
    rq_control([](Rq& c) {
      for (int s : {kIn, kRes}) c.make(s, DType::kBF16, {1, 2, 1, 1, 1, 1, 1, 2, 64});
      c.make(kOut, DType::k_f8e4m3fn, {1, 2, 1, 1, 1, 1, 1, 2, 64});
      c.make(kSc, DType::kF32, {1, 2, 1, 1, 1, 1, 1, 2, 1});
    });
  }
  SECTION("misaligned pointers and padded rows") {
    rq_control([](Rq& c) {
      c.make(kIn, DType::kBF16, {4, 64}, 3, 1);
      c.make(kRes, DType::kBF16, {4, 64}, 5, 3);
      c.make(kW, DType::kBF16, {64}, 0, 1);
      c.make(kOut, DType::k_f8e4m3fn, {4, 64}, 7, 5);
      c.make(kSc, DType::kF32, {4, 1}, 2, 3);
    });
  }
  SECTION("no rows: NULL data is fine for empty tensors") {
    Rq c(0, 64);
    for (int s : {kIn, kRes, kOut, kSc}) c.dl(s).data = nullptr;
    c.snapshot();
    CHECK(status_name(c.call()) == "SUCCESS");
    CHECK(c.changes() == "");
  }
}

TEST_CASE("rmsnorm_quant: NULL tensor or NULL data", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("input NULL") {
    c.set_null(kIn);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input is NULL");
  }
  SECTION("output NULL") {
    c.set_null(kOut);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output is NULL");
  }
  SECTION("weight NULL with norm RMS") {
    c.set_null(kW);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "weight is NULL", "RMS");
  }
  SECTION("scales NULL with a dynamic mode") {
    c.set_null(kSc);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales is NULL", "scale_mode 1");
  }
  SECTION("scales NULL with a static scale") {
    c.use_static_scale();
    c.set_null(kSc);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales is NULL", "scale_mode 0");
  }
  SECTION("input.data NULL") {
    c.dl(kIn).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input.data is NULL");
  }
  SECTION("residual.data NULL") {
    c.dl(kRes).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual.data is NULL");
  }
  SECTION("weight.data NULL") {
    c.dl(kW).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "weight.data is NULL");
  }
  SECTION("output.data NULL") {
    c.dl(kOut).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output.data is NULL");
  }
  SECTION("scales.data NULL") {
    c.dl(kSc).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales.data is NULL");
  }
  SECTION("static scales.data NULL") {
    c.use_static_scale();
    c.dl(kSc).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales.data is NULL");
  }
  SECTION("input.shape NULL") {
    c.dl(kIn).shape = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input.shape is NULL");
  }
  SECTION("output.shape NULL") {
    c.dl(kOut).shape = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output.shape is NULL");
  }
}

TEST_CASE("rmsnorm_quant: shape mismatch", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("output rows differ") {
    c.make(kOut, DType::k_f8e4m3fn, {3, 64});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output has shape [3, 64]", "input has shape [4, 64]");
  }
  SECTION("output H differs") {
    c.make(kOut, DType::k_f8e4m3fn, {4, 32});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output has shape [4, 32]", "64");
  }
  SECTION("output rank differs") {
    c.make(kOut, DType::k_f8e4m3fn, {256});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output has shape [256]", "input has shape [4, 64]");
  }
  SECTION("residual H differs") {
    c.make(kRes, DType::kBF16, {4, 32});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual has shape [4, 32]", "input has shape [4, 64]");
  }
  SECTION("residual rows differ") {
    c.make(kRes, DType::kBF16, {2, 64});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual has shape [2, 64]", "input has shape [4, 64]");
  }
  SECTION("weight length differs") {
    c.make(kW, DType::kBF16, {32});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "weight has shape [32]", "[64]", "[4, 64]");
  }
  SECTION("weight has rank 2") {
    c.make(kW, DType::kBF16, {1, 64});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "weight has shape [1, 64]", "[64]");
  }
  SECTION("per-row scales end in 2") {
    c.make(kSc, DType::kF32, {4, 2});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [4, 2]", "must end in 1");
  }
  SECTION("per-row scales rows differ") {
    c.make(kSc, DType::kF32, {3, 1});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [3, 1]", "input has shape [4, 64]");
  }
  SECTION("per-row scales without the trailing 1 (rank differs)") {
    c.make(kSc, DType::kF32, {4});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [4]", "input has shape [4, 64]");
  }
  SECTION("negative dimension") {
    int64_t shape[] = {-4, 64};
    c.dl(kIn).shape = shape;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input.shape[0] = -4");
  }
}

TEST_CASE("rmsnorm_quant: dtype mismatch or unsupported dtype", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("residual dtype differs from input") {
    c.make(kRes, DType::kF32, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual.dtype = f32", "input.dtype = bf16");
  }
  SECTION("int8 input") {
    c.make(kIn, DType::kI8, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.dtype = int8");
  }
  SECTION("FP8 input") {
    c.make(kIn, DType::k_f8e4m3fn, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.dtype = f8e4m3fn");
  }
  SECTION("f64 input (not a fusednorm type)") {
    c.dl(kIn).dtype = DLDataType{kDLFloat, 64, 1};
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.dtype", "code 2", "bits 64", "lanes 1");
  }
  SECTION("vector lanes") {
    c.dl(kIn).dtype = DLDataType{kDLBfloat, 16, 4};
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.dtype", "lanes 4");
  }
  SECTION("int8 weight") {
    c.make(kW, DType::kI8, {64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "weight.dtype = int8");
  }
  SECTION("f32 output") {
    c.make(kOut, DType::kF32, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "output.dtype = f32");
  }
  SECTION("f4e2m1 output") {
    c.make(kOut, DType::k_f4e2m1, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "output.dtype = f4e2m1");
  }
  SECTION("e8m0 output") {
    c.make(kOut, DType::kE8M0, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "output.dtype = e8m0");
  }
  SECTION("e8m0 static scale") {
    c.use_static_scale();
    c.make(kSc, DType::kE8M0, {1});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.dtype = e8m0", "static");
  }
  SECTION("bf16 static scale") {
    c.use_static_scale();
    c.make(kSc, DType::kBF16, {1});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.dtype = bf16", "static");
  }
  SECTION("int8 dynamic scales") {
    c.make(kSc, DType::kI8, {4, 1});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.dtype = int8");
  }
  SECTION("FP8 dynamic scales") {
    c.make(kSc, DType::k_f8e4m3fn, {4, 1});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.dtype = f8e4m3fn");
  }
}

TEST_CASE("rmsnorm_quant: tensors on different devices", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("output on cuda:0") {
    c.set_device(kOut, kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output is on cuda:0", "input is on cpu:0");
  }
  SECTION("residual on rocm:0") {
    c.set_device(kRes, kDLROCM, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual is on rocm:0", "input is on cpu:0");
  }
  SECTION("weight on another CPU device id") {
    c.set_device(kW, kDLCPU, 1);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "weight is on cpu:1", "input is on cpu:0");
  }
  SECTION("scales on cuda:1, the rest on cuda:0") {
    c.set_all_devices(kDLCUDA, 0);
    c.set_device(kSc, kDLCUDA, 1);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales is on cuda:1", "input is on cuda:0");
  }
  SECTION("static scale on cuda:0") {
    c.use_static_scale();
    c.set_device(kSc, kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales is on cuda:0", "input is on cpu:0");
  }
  SECTION("input on cuda:0, the rest on the CPU") {
    c.set_device(kIn, kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual is on cpu:0", "input is on cuda:0");
  }
  SECTION("device type fusednorm does not know (Vulkan)") {
    c.set_all_devices(kDLVulkan, 0);
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.device.device_type = 7");
  }
  SECTION("negative device id") {
    c.set_all_devices(kDLCPU, -1);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input.device.device_id = -1");
  }
}

TEST_CASE("rmsnorm_quant: GPU device without a backend", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("all on cuda:0") {
    c.set_all_devices(kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_BACKEND_UNAVAILABLE, "cuda:0", "CUDA");
  }
  SECTION("all on rocm:1") {
    c.set_all_devices(kDLROCM, 1);
    CHECK_REJECTED(c, FUSEDNORM_BACKEND_UNAVAILABLE, "rocm:1");
  }
  SECTION("a malformed GPU call is still INVALID_ARGUMENT (validation comes first)") {
    c.set_all_devices(kDLCUDA, 0);
    c.make(kOut, DType::k_f8e4m3fn, {4, 32});
    c.set_device(kOut, kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output has shape [4, 32]");
  }
}

TEST_CASE("rmsnorm_quant: H not a multiple of the group size", "[bad_input][rmsnorm_quant]") {
  SECTION("H = 96, group 64") {
    Rq c(4, 96);
    c.use_groups(32);  // a [4, 3] scale tensor
    c.opts.group_size = 64;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input H = 96", "group_size = 64");
  }
  SECTION("H = 64, group 128") {
    Rq c;
    c.use_groups(64);
    c.opts.group_size = 128;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input H = 64", "group_size = 128");
  }
}

TEST_CASE("rmsnorm_quant: unsupported group size", "[bad_input][rmsnorm_quant]") {
  for (int64_t g : {int64_t(48), int64_t(16), int64_t(256), int64_t(0), int64_t(-32), int64_t(1) << 40}) {
    DYNAMIC_SECTION("group_size " << g) {
      Rq c;
      c.use_groups(32);
      c.opts.group_size = g;
      const std::string value = "options->group_size = " + std::to_string(g);
      CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, value.c_str());
    }
  }
}

TEST_CASE("rmsnorm_quant: option combinations the library rejects", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("PACKED_ROW_END with DYNAMIC_GROUP") {
    c.use_packed();
    c.opts.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    c.opts.group_size = 32;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "PACKED_ROW_END", "DYNAMIC_ROW", "not 2");
  }
  SECTION("PACKED_ROW_END with STATIC") {
    c.use_packed();
    c.opts.scale_mode = FUSEDNORM_SCALE_STATIC;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "PACKED_ROW_END", "DYNAMIC_ROW", "not 0");
  }
  SECTION("PACKED_ROW_END with a scales tensor") {
    c.use_packed();
    c.make(kSc, DType::kF32, {4, 1});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales must be NULL", "PACKED_ROW_END");
  }
  SECTION("PACKED_ROW_END with output of H columns") {
    c.use_packed();
    c.make(kOut, DType::k_f8e4m3fn, {4, 64});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output has shape [4, 64]", "68");
  }
  SECTION("norm out of range") {
    c.opts.norm = 2;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->norm = 2");
  }
  SECTION("scale_mode out of range") {
    c.opts.scale_mode = 3;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_mode = 3");
  }
  SECTION("negative scale_mode") {
    c.opts.scale_mode = -1;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_mode = -1");
  }
  SECTION("scale_placement out of range") {
    c.opts.scale_placement = 2;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_placement = 2");
  }
  SECTION("weight_offset NaN") {
    c.opts.weight_offset = kNaN;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->weight_offset = ", "nan");
  }
  SECTION("weight_offset inf") {
    c.opts.weight_offset = kInf;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->weight_offset = inf");
  }
}

TEST_CASE("rmsnorm_quant: scale tensor too small", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("groups of 32: [4, 1] instead of [4, 2]") {
    c.use_groups(32);
    c.make(kSc, DType::kF32, {4, 1});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [4, 1]", "must end in 2", "64 / 32");
  }
  SECTION("groups of 32, e8m0: [4, 1] instead of [4, 2]") {
    c.use_groups(32, DType::kE8M0);
    c.make(kSc, DType::kE8M0, {4, 1});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [4, 1]", "must end in 2");
  }
  SECTION("per-row scales with no column") {
    c.make(kSc, DType::kF32, {4, 0});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [4, 0]", "must end in 1");
  }
  SECTION("static scale of 2 elements") {
    c.use_static_scale();
    c.make(kSc, DType::kF32, {2});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [2]", "exactly one element");
  }
  SECTION("static scale of 0 elements") {
    c.use_static_scale();
    c.make(kSc, DType::kF32, {0});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "scales has shape [0]", "exactly one element");
  }
}

TEST_CASE("rmsnorm_quant: eps negative, NaN or infinite", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("-1e-6") {
    c.opts.eps = -1e-6f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->eps = -1e-06");
  }
  SECTION("-0.5") {
    c.opts.eps = -0.5f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->eps = -0.5");
  }
  SECTION("NaN") {
    c.opts.eps = kNaN;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->eps = ", "nan");
  }
  SECTION("+inf") {
    c.opts.eps = kInf;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->eps = inf");
  }
}

TEST_CASE("rmsnorm_quant: scale_ub <= 0", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("0") {
    c.opts.scale_ub = 0.0f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_ub = 0");
  }
  SECTION("-0") {
    c.opts.scale_ub = -0.0f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_ub = -0");
  }
  SECTION("-1") {
    c.opts.scale_ub = -1.0f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_ub = -1");
  }
  SECTION("NaN") {
    c.opts.scale_ub = kNaN;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_ub = ", "nan");
  }
  SECTION("-inf") {
    c.opts.scale_ub = -kInf;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->scale_ub = -inf");
  }
}

TEST_CASE("rmsnorm_quant: min_scale < 0 or not finite", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("-1") {
    c.opts.min_scale = -1.0f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->min_scale = -1");
  }
  SECTION("-1e-30") {
    c.opts.min_scale = -1e-30f;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->min_scale = -1e-30");
  }
  SECTION("NaN") {
    c.opts.min_scale = kNaN;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->min_scale = ", "nan");
  }
  SECTION("+inf") {
    c.opts.min_scale = kInf;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->min_scale = inf");
  }
}

TEST_CASE("rmsnorm_quant: qmax beyond the format's max", "[bad_input][rmsnorm_quant]") {
  struct Case {
    DType out;
    float qmax;
    const char* value;
    const char* max;
  };
  const Case cases[] = {
      {DType::k_f8e4m3fn, 449.0f, "options->qmax = 449", "448"},
      {DType::k_f8e4m3fnuz, 241.0f, "options->qmax = 241", "240"},
      {DType::k_f8e4m3, 448.0f, "options->qmax = 448", "240"},
      {DType::k_f8e5m2, 57345.0f, "options->qmax = 57345", "57344"},
      {DType::k_f8e5m2fnuz, 65536.0f, "options->qmax = 65536", "57344"},
      {DType::kI8, 128.0f, "options->qmax = 128", "127"},
      {DType::k_f8e4m3fn, kInf, "options->qmax = inf", "448"},
      {DType::k_f8e4m3fn, -1.0f, "options->qmax = -1", "448"},
      {DType::k_f8e4m3fn, kNaN, "options->qmax = ", "448"},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(dtype_name(k.out) << " qmax " << k.qmax) {
      Rq c;
      c.make(kOut, k.out, {4, 64});
      c.opts.qmax = k.qmax;
      CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, k.value, k.max, dtype_name(k.out));
    }
  }
}

TEST_CASE("rmsnorm_quant: options->struct_size too small", "[bad_input][rmsnorm_quant]") {
  for (size_t size : {size_t(0), size_t(8), sizeof(fusednorm_rmsnorm_quant_options) - 4}) {
    DYNAMIC_SECTION("struct_size " << size) {
      Rq c;
      c.opts.struct_size = size;
      const std::string value = "options->struct_size = " + std::to_string(size);
      const std::string expected = std::to_string(sizeof(fusednorm_rmsnorm_quant_options));
      CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, value.c_str(), expected.c_str());
    }
  }
}

TEST_CASE("rmsnorm_quant: negative strides", "[bad_input][rmsnorm_quant]") {
  Rq c;
  int64_t neg[] = {-64, 1};
  SECTION("input") {
    c.dl(kIn).strides = neg;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.strides[0] = -64", "negative");
  }
  SECTION("residual") {
    c.dl(kRes).strides = neg;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "residual.strides[0] = -64", "negative");
  }
  SECTION("output") {
    c.dl(kOut).strides = neg;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "output.strides[0] = -64", "negative");
  }
  SECTION("scales, leading dimension") {
    int64_t s[] = {-1, 1};
    c.dl(kSc).strides = s;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.strides[0] = -1", "negative");
  }
  SECTION("group scales, last dimension") {
    c.use_groups(32);
    int64_t s[] = {2, -1};
    c.dl(kSc).strides = s;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.strides[1] = -1", "negative");
  }
}

TEST_CASE("rmsnorm_quant: non-contiguous last dimension", "[bad_input][rmsnorm_quant]") {
  Rq c;
  int64_t s2[] = {128, 2};
  SECTION("input, stride 2") {
    c.dl(kIn).strides = s2;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.strides[1] = 2", "contiguous");
  }
  SECTION("input, stride 0") {
    int64_t s0[] = {64, 0};
    c.dl(kIn).strides = s0;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.strides[1] = 0", "contiguous");
  }
  SECTION("residual") {
    c.dl(kRes).strides = s2;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "residual.strides[1] = 2", "contiguous");
  }
  SECTION("weight") {
    int64_t w[] = {2};
    c.dl(kW).strides = w;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "weight.strides[0] = 2", "contiguous");
  }
  SECTION("output") {
    c.dl(kOut).strides = s2;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "output.strides[1] = 2", "contiguous");
  }
}

TEST_CASE("rmsnorm_quant: rank 0 and rank > 9", "[bad_input][rmsnorm_quant]") {
  Rq c;
  SECTION("input rank 0") {
    c.dl(kIn).ndim = 0;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input.ndim = 0", "1..9");
  }
  SECTION("input rank -1") {
    c.dl(kIn).ndim = -1;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input.ndim = -1", "1..9");
  }
  SECTION("output rank 0") {
    c.dl(kOut).ndim = 0;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output.ndim = 0", "1..9");
  }
  SECTION("input rank 10") {
    for (int s : {kIn, kRes}) c.make(s, DType::kBF16, {1, 1, 1, 1, 1, 1, 1, 1, 4, 64});
    c.make(kOut, DType::k_f8e4m3fn, {1, 1, 1, 1, 1, 1, 1, 1, 4, 64});
    c.make(kSc, DType::kF32, {1, 1, 1, 1, 1, 1, 1, 1, 4, 1});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "input.ndim = 10", "1..9");
  }
  SECTION("scales rank 10") {
    c.make(kSc, DType::kF32, {1, 1, 1, 1, 1, 1, 1, 1, 4, 1});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "scales.ndim = 10", "1..9");
  }
}

TEST_CASE("rmsnorm_quant: sizes whose byte offsets overflow 64 bits", "[bad_input][rmsnorm_quant]") {
  // The data pointers are the fixture's small real buffers: validation must reject these
  // before touching any memory.
  Rq c;
  int64_t huge[] = {kHuge, 64};
  int64_t huge1[] = {kHuge, 1};
  int64_t huge_strides[] = {kHugeStride, 1};
  int64_t broadcast[] = {0, 1};  // every row is the same row: spans nothing
  const char* huge_str = "[4611686018427387903, 64]";
  for (int s : {kIn, kRes, kOut}) c.dl(s).shape = huge;
  c.dl(kSc).shape = huge1;
  SECTION("input: huge rows with a huge stride") {
    c.dl(kIn).strides = huge_strides;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input", huge_str, "64 bits");
  }
  SECTION("input: huge rows, compact (strides NULL)") {
    c.dl(kIn).strides = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input", huge_str, "64 bits");
  }
  SECTION("residual: huge stride (input broadcast)") {
    c.dl(kIn).strides = broadcast;
    c.dl(kRes).strides = huge_strides;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "residual", huge_str, "64 bits");
  }
  SECTION("output: compact huge rows (input broadcast, no residual)") {
    c.dl(kIn).strides = broadcast;
    c.set_null(kRes);
    c.dl(kOut).strides = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output", huge_str, "64 bits");
  }
  SECTION("output: rows broadcast (stride 0) would overlap") {
    c.dl(kIn).strides = broadcast;
    c.set_null(kRes);
    c.dl(kOut).strides = broadcast;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "output.strides[0] = 0", "overlap");
  }
  SECTION("scales: huge column stride (column-major scales, 4 rows)") {
    Rq g;
    g.use_groups(32);  // scales [4, 2]
    int64_t col_major_huge[] = {1, kHugeStride};
    g.dl(kSc).strides = col_major_huge;
    CHECK_REJECTED(g, FUSEDNORM_INVALID_ARGUMENT, "scales", "[1, 2305843009213693951]", "64 bits");
  }
  SECTION("scales: column stride 0 would overlap") {
    Rq g;
    g.use_groups(32);
    int64_t col_zero[] = {1, 0};
    g.dl(kSc).strides = col_zero;
    CHECK_REJECTED(g, FUSEDNORM_INVALID_ARGUMENT, "scales.strides[1] = 0", "overlap");
  }
  SECTION("rows: 2^32 x 2^32 rows") {
    int64_t rows3[] = {int64_t(1) << 32, int64_t(1) << 32, 64};
    int64_t rows3_1[] = {int64_t(1) << 32, int64_t(1) << 32, 1};
    int64_t bstrides[] = {0, 0, 1};
    for (int s : {kIn, kRes, kOut, kSc}) {
      c.dl(s).ndim = 3;
      c.dl(s).shape = s == kSc ? rows3_1 : rows3;
      c.dl(s).strides = bstrides;
    }
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input", "[4294967296, 4294967296, 64]", "64 bits");
  }
}

TEST_CASE("rmsnorm_quant: byte_offset that overflows 64 bits", "[bad_input][rmsnorm_quant]") {
  // data + byte_offset with byte_offset = 2^63 is no address: reject, naming the tensor and the
  // byte_offset. Every other argument is valid.
  const Part offset = {"9223372036854775808", "0x8000000000000000", "byte_offset"};
  struct Case {
    int slot;
    const char* name;
    bool static_scale;
  };
  const Case cases[] = {{kIn, "input", false},   {kRes, "residual", false}, {kW, "weight", false},
                        {kOut, "output", false}, {kSc, "scales", false},    {kSc, "scales", true}};
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.name << (k.static_scale ? " (static scale)" : "")) {
      Rq c;
      if (k.static_scale) c.use_static_scale();
      c.dl(k.slot).byte_offset = kWildOffset;
      CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, k.name, offset);
    }
  }
  SECTION("input, byte_offset 2^64 - 1") {
    Rq c;
    c.dl(kIn).byte_offset = UINT64_MAX;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "input", Part({"18446744073709551615", "0xffffffffffffffff", "byte_offset"}));
  }
}

// ================================================================ cast

TEST_CASE("cast: valid calls succeed and equal the reference (positive control)", "[bad_input][cast]") {
  SECTION("f32 -> f8e4m3fn") { cast_control(DType::kF32, DType::k_f8e4m3fn, {4, 64}, [](Cast&) {}); }
  SECTION("bf16 -> f4e2m1, options NULL") {
    cast_control(DType::kBF16, DType::k_f4e2m1, {4, 64}, [](Cast& c) { c.null_opts = true; });
  }
  SECTION("f32 -> e8m0, rounding up") {
    cast_control(DType::kF32, DType::kE8M0, {4, 64}, [](Cast& c) { c.opts.e8m0_rounding = FUSEDNORM_E8M0_UP; });
  }
  SECTION("f16 -> int8, rank 9, padded rows, misaligned") {
    cast_control(DType::kF16, DType::kI8, {1, 1, 1, 1, 1, 1, 2, 3, 40}, [](Cast& c) {
      c.make(kSrc, DType::kF16, {1, 1, 1, 1, 1, 1, 2, 3, 40}, 3, 1);
      c.make(kDst, DType::kI8, {1, 1, 1, 1, 1, 1, 2, 3, 40}, 5, 3);
    });
  }
  SECTION("no rows: NULL data is fine for empty tensors") {
    Cast c(DType::kF32, DType::k_f8e4m3fn, {0, 64});
    c.dl(kSrc).data = nullptr;
    c.dl(kDst).data = nullptr;
    c.snapshot();
    CHECK(status_name(c.call()) == "SUCCESS");
    CHECK(c.changes() == "");
  }
}

TEST_CASE("cast: NULL tensor or NULL data", "[bad_input][cast]") {
  Cast c;
  SECTION("src NULL") {
    c.set_null(kSrc);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src is NULL");
  }
  SECTION("dst NULL") {
    c.set_null(kDst);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst is NULL");
  }
  SECTION("src.data NULL") {
    c.dl(kSrc).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src.data is NULL");
  }
  SECTION("dst.data NULL") {
    c.dl(kDst).data = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst.data is NULL");
  }
  SECTION("dst.shape NULL") {
    c.dl(kDst).shape = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst.shape is NULL");
  }
}

TEST_CASE("cast: shape mismatch", "[bad_input][cast]") {
  Cast c;
  SECTION("last dimension") {
    c.make(kDst, DType::k_f8e4m3fn, {4, 32});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst has shape [4, 32]", "src has shape [4, 64]");
  }
  SECTION("leading dimension") {
    c.make(kDst, DType::k_f8e4m3fn, {5, 64});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst has shape [5, 64]", "src has shape [4, 64]");
  }
  SECTION("rank") {
    c.make(kDst, DType::k_f8e4m3fn, {256});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst has shape [256]", "src has shape [4, 64]");
  }
  SECTION("negative dimension") {
    int64_t shape[] = {4, -64};
    c.dl(kSrc).shape = shape;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src.shape[1] = -64");
  }
}

TEST_CASE("cast: unsupported dtype", "[bad_input][cast]") {
  Cast c;
  SECTION("f64 src") {
    c.dl(kSrc).dtype = DLDataType{kDLFloat, 64, 1};
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "src.dtype", "code 2", "bits 64");
  }
  SECTION("int16 dst") {
    c.dl(kDst).dtype = DLDataType{kDLInt, 16, 1};
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "dst.dtype", "code 0", "bits 16");
  }
  SECTION("uint8 dst") {
    c.dl(kDst).dtype = DLDataType{kDLUInt, 8, 1};
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "dst.dtype", "code 1", "bits 8");
  }
  SECTION("2 lanes") {
    c.dl(kSrc).dtype = DLDataType{kDLFloat, 32, 2};
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "src.dtype", "lanes 2");
  }
}

TEST_CASE("cast: tensors on different devices", "[bad_input][cast]") {
  Cast c;
  SECTION("dst on cuda:0") {
    c.set_device(kDst, kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst is on cuda:0", "src is on cpu:0");
  }
  SECTION("src on rocm:0") {
    c.set_device(kSrc, kDLROCM, 0);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst is on cpu:0", "src is on rocm:0");
  }
  SECTION("cuda:0 and cuda:1") {
    c.set_all_devices(kDLCUDA, 0);
    c.set_device(kDst, kDLCUDA, 1);
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst is on cuda:1", "src is on cuda:0");
  }
  SECTION("unknown device type") {
    c.set_all_devices(kDLOpenCL, 0);
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "src.device.device_type = 4");
  }
}

TEST_CASE("cast: GPU device without a backend", "[bad_input][cast]") {
  Cast c;
  SECTION("cuda:0") {
    c.set_all_devices(kDLCUDA, 0);
    CHECK_REJECTED(c, FUSEDNORM_BACKEND_UNAVAILABLE, "cuda:0", "CUDA");
  }
  SECTION("rocm:2") {
    c.set_all_devices(kDLROCM, 2);
    CHECK_REJECTED(c, FUSEDNORM_BACKEND_UNAVAILABLE, "rocm:2");
  }
}

TEST_CASE("cast: f4e2m1 with an odd last dimension", "[bad_input][cast]") {
  SECTION("dst") {
    Cast c(DType::kF32, DType::k_f4e2m1, {4, 63});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst", "f4e2m1", "63", "even");
  }
  SECTION("src") {
    Cast c(DType::k_f4e2m1, DType::kF32, {4, 63});
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src", "f4e2m1", "63", "even");
  }
  SECTION("f4e2m1 rows that do not start on a byte") {
    Cast c(DType::kF32, DType::k_f4e2m1, {4, 64});
    int64_t s[] = {65, 1};
    c.dl(kDst).strides = s;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "dst.strides[0] = 65", "byte");
  }
}

TEST_CASE("cast: invalid options", "[bad_input][cast]") {
  Cast c(DType::kF32, DType::kE8M0);
  SECTION("e8m0_rounding 2") {
    c.opts.e8m0_rounding = 2;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->e8m0_rounding = 2");
  }
  SECTION("e8m0_rounding -1") {
    c.opts.e8m0_rounding = -1;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->e8m0_rounding = -1");
  }
  SECTION("struct_size 0") {
    c.opts.struct_size = 0;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->struct_size = 0");
  }
  SECTION("struct_size 8") {
    c.opts.struct_size = 8;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "options->struct_size = 8");
  }
}

TEST_CASE("cast: strides and rank", "[bad_input][cast]") {
  Cast c;
  SECTION("negative stride") {
    int64_t s[] = {-64, 1};
    c.dl(kSrc).strides = s;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "src.strides[0] = -64", "negative");
  }
  SECTION("non-contiguous last dimension") {
    int64_t s[] = {128, 2};
    c.dl(kDst).strides = s;
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "dst.strides[1] = 2", "contiguous");
  }
  SECTION("rank 0") {
    c.dl(kSrc).ndim = 0;
    c.dl(kDst).ndim = 0;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src.ndim = 0", "1..9");
  }
  SECTION("rank 10") {
    c.make(kSrc, DType::kF32, {1, 1, 1, 1, 1, 1, 1, 1, 4, 64});
    c.make(kDst, DType::k_f8e4m3fn, {1, 1, 1, 1, 1, 1, 1, 1, 4, 64});
    CHECK_REJECTED(c, FUSEDNORM_UNSUPPORTED, "src.ndim = 10", "1..9");
  }
}

TEST_CASE("cast: sizes whose byte offsets overflow 64 bits", "[bad_input][cast]") {
  Cast c;
  int64_t huge[] = {kHuge, 64};
  int64_t huge_strides[] = {kHugeStride, 1};
  int64_t broadcast[] = {0, 1};
  const char* huge_str = "[4611686018427387903, 64]";
  c.dl(kSrc).shape = huge;
  c.dl(kDst).shape = huge;
  SECTION("src: huge stride") {
    c.dl(kSrc).strides = huge_strides;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src", huge_str, "64 bits");
  }
  SECTION("dst: compact (src broadcast)") {
    c.dl(kSrc).strides = broadcast;
    c.dl(kDst).strides = nullptr;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst", huge_str, "64 bits");
  }
  SECTION("f4e2m1 dst: huge stride (src broadcast)") {
    c.make(kDst, DType::k_f4e2m1, {4, 64});
    c.dl(kDst).shape = huge;
    c.dl(kDst).strides = huge_strides;
    c.dl(kSrc).strides = broadcast;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst", huge_str, "64 bits");
  }
  SECTION("rows: 2^32 x 2^32 rows") {
    int64_t rows3[] = {int64_t(1) << 32, int64_t(1) << 32, 64};
    int64_t bstrides[] = {0, 0, 1};
    for (int s : {kSrc, kDst}) {
      c.dl(s).ndim = 3;
      c.dl(s).shape = rows3;
      c.dl(s).strides = bstrides;
    }
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src", "[4294967296, 4294967296, 64]", "64 bits");
  }
}

TEST_CASE("cast: byte_offset that overflows 64 bits", "[bad_input][cast]") {
  const Part offset = {"9223372036854775808", "0x8000000000000000", "byte_offset"};
  SECTION("src") {
    Cast c;
    c.dl(kSrc).byte_offset = kWildOffset;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "src", offset);
  }
  SECTION("dst") {
    Cast c;
    c.dl(kDst).byte_offset = kWildOffset;
    CHECK_REJECTED(c, FUSEDNORM_INVALID_ARGUMENT, "dst", offset);
  }
}

// ================================================================ queries, status strings, errors

TEST_CASE("query_backend: CPU available, GPUs unavailable with a reason, bad calls rejected", "[bad_input][query]") {
  SECTION("CPU") {
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    REQUIRE(fusednorm_query_backend(kDLCPU, &info) == FUSEDNORM_SUCCESS);
    CHECK(info.struct_size == sizeof info);
    CHECK(info.device_type == kDLCPU);
    CHECK(info.available == 1);
    CHECK(info.device_count == 1);
    CHECK(std::string(info.name) == "cpu");
    const std::string target = fusednorm_cpu_target();
    CHECK_FALSE(target.empty());
    CHECK_THAT(std::string(info.detail), Catch::Contains(target) && Catch::Contains("Highway"));
  }
  SECTION("CUDA and ROCm") {
    for (int32_t type : {int32_t(kDLCUDA), int32_t(kDLROCM)}) {
      INFO("device_type " << type);
      fusednorm_backend_info info{};
      info.struct_size = sizeof info;
      REQUIRE(fusednorm_query_backend(type, &info) == FUSEDNORM_SUCCESS);
      CHECK(info.device_type == type);
      CHECK(info.available == 0);
      CHECK(info.device_count == 0);
      CHECK(std::string(info.name) == (type == kDLCUDA ? "cuda" : "hip"));
      CHECK_THAT(std::string(info.detail), Catch::Contains(type == kDLCUDA ? "CUDA" : "HIP"));
    }
  }
  SECTION("NULL info") {
    CHECK(fusednorm_query_backend(kDLCPU, nullptr) == FUSEDNORM_INVALID_ARGUMENT);
    CHECK_THAT(std::string(fusednorm_last_error()), Catch::Contains("info is NULL"));
  }
  // A rejected query writes nothing into info.
  auto rejected = [](int32_t type, size_t struct_size, const char* part) {
    fusednorm_backend_info info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = struct_size;
    fusednorm_backend_info before;
    memcpy(&before, &info, sizeof info);
    CHECK(status_name(fusednorm_query_backend(type, &info)) == "INVALID_ARGUMENT");
    CHECK_THAT(std::string(fusednorm_last_error()), Catch::Contains(part));
    CHECK(memcmp(&before, &info, sizeof info) == 0);
  };
  SECTION("device types other than CPU, CUDA, ROCm") {
    rejected(kDLVulkan, sizeof(fusednorm_backend_info), "device_type = 7");
    rejected(0, sizeof(fusednorm_backend_info), "device_type = 0");
    rejected(-1, sizeof(fusednorm_backend_info), "device_type = -1");
    rejected(kDLCUDAHost, sizeof(fusednorm_backend_info), "device_type = 3");
  }
  SECTION("struct_size too small") {
    rejected(kDLCPU, 0, "info->struct_size = 0");
    rejected(kDLCPU, 8, "info->struct_size = 8");
  }
}

TEST_CASE("status strings and the thread-local last error", "[bad_input][errors]") {
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_SUCCESS)) == "SUCCESS");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_INVALID_ARGUMENT)) == "INVALID_ARGUMENT");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_UNSUPPORTED)) == "UNSUPPORTED");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_BACKEND_UNAVAILABLE)) == "BACKEND_UNAVAILABLE");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_DEVICE_ERROR)) == "DEVICE_ERROR");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_INTERNAL_ERROR)) == "INTERNAL_ERROR");
  CHECK(fusednorm_status_string(fusednorm_status(99)) != nullptr);

  REQUIRE(fusednorm_cast(nullptr, nullptr, nullptr, nullptr) == FUSEDNORM_INVALID_ARGUMENT);
  const std::string mine = fusednorm_last_error();
  CHECK_THAT(mine, Catch::Contains("src is NULL"));
  std::string other_before, other_after;
  std::thread th([&] {
    other_before = fusednorm_last_error();
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    fusednorm_query_backend(42, &info);
    other_after = fusednorm_last_error();
  });
  th.join();
  CHECK(other_before == "");
  CHECK_THAT(other_after, Catch::Contains("device_type = 42"));
  CHECK(std::string(fusednorm_last_error()) == mine);
}

TEST_CASE("C++ API: failures throw fusednorm::Error with the status and the message", "[bad_input][cpp]") {
  SECTION("positive control: valid calls do not throw") {
    Rq r;
    CHECK_NOTHROW(fusednorm::rmsnorm_quant(*r.ptr(kIn), r.ptr(kRes), r.ptr(kW), *r.ptr(kOut), r.ptr(kSc)));
    Cast c;
    CHECK_NOTHROW(fusednorm::cast(*c.ptr(kSrc), *c.ptr(kDst)));
    int major = -1, minor = -1, patch = -1;
    fusednorm_version(&major, &minor, &patch);
    CHECK(fusednorm::version() ==
          std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
    CHECK(fusednorm::cpu_target() == std::string(fusednorm_cpu_target()));
    const auto all = fusednorm::backends();
    REQUIRE(all.size() == 3);
    CHECK(all[0].available == 1);
    CHECK(all[1].available == 0);
    CHECK(all[2].available == 0);
  }
  auto expect_error = [](Args& args, auto&& fn, fusednorm_status want, const char* part) {
    args.snapshot();
    try {
      fn();
      FAIL("no fusednorm::Error thrown");
    } catch (const fusednorm::Error& e) {
      INFO("what(): " << e.what());
      CHECK(status_name(e.status()) == status_name(want));
      CHECK_THAT(std::string(e.what()), Catch::StartsWith(status_name(want) + ": ") && Catch::Contains(part));
      CHECK_THAT(std::string(e.what()), Catch::Contains(fusednorm_last_error()));
    }
    CHECK(args.changes() == "");
  };
  SECTION("rmsnorm_quant: INVALID_ARGUMENT") {
    Rq r;
    r.set_device(kOut, kDLCUDA, 0);
    expect_error(r, [&] { fusednorm::rmsnorm_quant(*r.ptr(kIn), r.ptr(kRes), r.ptr(kW), *r.ptr(kOut), r.ptr(kSc)); },
                 FUSEDNORM_INVALID_ARGUMENT, "output is on cuda:0 but input is on cpu:0");
  }
  SECTION("rmsnorm_quant: UNSUPPORTED, with options") {
    Rq r;
    fusednorm::RmsnormQuantOptions o;
    o.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    o.group_size = 48;
    expect_error(r, [&] { fusednorm::rmsnorm_quant(*r.ptr(kIn), r.ptr(kRes), r.ptr(kW), *r.ptr(kOut), r.ptr(kSc), o); },
                 FUSEDNORM_UNSUPPORTED, "options->group_size = 48");
  }
  SECTION("cast: UNSUPPORTED") {
    Cast c;
    c.dl(kSrc).dtype = DLDataType{kDLFloat, 64, 1};
    expect_error(c, [&] { fusednorm::cast(*c.ptr(kSrc), *c.ptr(kDst)); }, FUSEDNORM_UNSUPPORTED, "src.dtype");
  }
  SECTION("cast: INVALID_ARGUMENT from the options") {
    Cast c(DType::kF32, DType::kE8M0);
    fusednorm::CastOptions o;
    o.e8m0_rounding = 7;
    expect_error(c, [&] { fusednorm::cast(*c.ptr(kSrc), *c.ptr(kDst), o); }, FUSEDNORM_INVALID_ARGUMENT,
                 "options->e8m0_rounding = 7");
  }
  SECTION("cast: BACKEND_UNAVAILABLE") {
    Cast c;
    c.set_all_devices(kDLCUDA, 0);
    expect_error(c, [&] { fusednorm::cast(*c.ptr(kSrc), *c.ptr(kDst)); }, FUSEDNORM_BACKEND_UNAVAILABLE, "cuda:0");
  }
  SECTION("query_backend: INVALID_ARGUMENT") {
    try {
      fusednorm::query_backend(kDLVulkan);
      FAIL("no fusednorm::Error thrown");
    } catch (const fusednorm::Error& e) {
      CHECK(e.status() == FUSEDNORM_INVALID_ARGUMENT);
      CHECK_THAT(std::string(e.what()), Catch::Contains("device_type = 7"));
    }
  }
}

}  // namespace test
}  // namespace fusednorm
