// Harness for bad-input tests (product.md, "Bad input"): an invalid call returns its status with a
// message naming the argument and the values, and writes nothing.
//
// - CallUnderTest: one call (the library's entry point and the scalar reference's), and the
//   allocations it could write; snapshot() copies every byte of them, changes() names the first
//   byte that differs since.
// - Args: a CallUnderTest whose tensor arguments each own an allocation poisoned with 0xA5 around
//   and inside the data (tests/common/test_tensor.h); the DLTensors actually passed start as views
//   of them and a test edits them freely (shape, strides, dtype, device, data, byte_offset).
// - check_rejected: makes the call in a forked child, so that a call the validation wrongly lets
//   through (and that then crashes or hangs in a kernel on a wild pointer or a 2^62-row tensor)
//   fails its own test instead of taking the whole binary down; FUSEDNORM_TEST_NO_FORK=1 makes it
//   in-process (for a debugger). Checks the status, every message fragment, that nothing was
//   written, and that the reference (which shares the validation) rejects with the same status and
//   message and writes nothing either.
// - BadCase / run_bad_cases: the rejections as a table of rows {what is broken, a mutation of a
//   valid baseline call, expected status, message fragments}, each row its own DYNAMIC_SECTION.
// - check_matches_reference / run_controls: positive controls (valid calls succeed and equal the
//   reference byte for byte), so that a validation rejecting everything would be noticed.
#pragma once

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/test_tensor.h"
#include "core/error.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace test {

inline std::string status_name(int32_t st) { return fusednorm_status_string(fusednorm_status(st)); }

// "" when the n bytes are equal, else "<name>: byte i of its allocation changed from .. to ..".
inline std::string first_difference(const char* name, const uint8_t* was, const uint8_t* now, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (was[i] != now[i]) {
      char buf[200];
      snprintf(buf, sizeof buf, "%s: byte %zu of its allocation changed from 0x%02x to 0x%02x", name, i,
               unsigned(was[i]), unsigned(now[i]));
      return buf;
    }
  return "";
}

// ---------------------------------------------------------------- a call under test

class CallUnderTest {
 public:
  virtual ~CallUnderTest() = default;

  // Writes the call's inputs; check_rejected runs it before taking the snapshot.
  virtual void prepare() {}
  virtual fusednorm_status call() = 0;
  virtual fusednorm_status call_reference() = 0;
  // False for an entry point without a scalar reference (fusednorm_query_backend).
  virtual bool has_reference() const { return true; }
  // The allocations the call must leave alone when it fails (null: none in this slot).
  virtual size_t allocation_count() const = 0;
  virtual const char* allocation_name(size_t i) const = 0;
  virtual const std::vector<uint8_t>* allocation(size_t i) const = 0;

  // Copies every allocation; changes() then names the first byte that differs ("" if none).
  void snapshot() {
    before_.clear();
    for (size_t i = 0; i < allocation_count(); ++i) {
      const std::vector<uint8_t>* a = allocation(i);
      before_.push_back(a ? *a : std::vector<uint8_t>());
    }
  }
  std::string changes() const {
    for (size_t i = 0; i < allocation_count(); ++i) {
      const std::vector<uint8_t>* now = allocation(i);
      if (now == nullptr) continue;
      const std::vector<uint8_t>& was = before_[i];
      if (now->size() != was.size()) return std::string(allocation_name(i)) + ": allocation resized";
      const std::string d = first_difference(allocation_name(i), was.data(), now->data(), was.size());
      if (!d.empty()) return d;
    }
    return "";
  }

 private:
  std::vector<std::vector<uint8_t>> before_;
};

// The tensor arguments of one call, each owning a HostTensor; a slot can be passed as NULL.
class Args : public CallUnderTest {
 public:
  explicit Args(std::vector<const char*> names)
      : names_(std::move(names)), t_(names_.size()), dl_(names_.size()), null_(names_.size(), false) {}

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
  const char* name(int s) const { return names_[size_t(s)]; }
  int slots() const { return int(names_.size()); }
  void set_null(int s) { null_[size_t(s)] = true; }
  void set_device(int s, int32_t type, int32_t id) { dl_[size_t(s)].device = DLDevice{DLDeviceType(type), id}; }
  void set_all_devices(int32_t type, int32_t id) {
    for (int s = 0; s < slots(); ++s) set_device(s, type, id);
  }
  // Points slot s's shape (strides) at a copy of v that lives as long as this Args; the tensor's
  // allocation stays what it was (so a huge shape over a small buffer is how the tests build one).
  void set_shape(int s, std::vector<int64_t> v) { dl(s).shape = keep(std::move(v)); }
  void set_strides(int s, std::vector<int64_t> v) { dl(s).strides = keep(std::move(v)); }
  // Both, with ndim = v.size().
  void set_layout(int s, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    dl(s).ndim = int32_t(shape.size());
    set_shape(s, std::move(shape));
    set_strides(s, std::move(strides));
  }

  size_t allocation_count() const override { return t_.size(); }
  const char* allocation_name(size_t i) const override { return names_[i]; }
  const std::vector<uint8_t>* allocation(size_t i) const override { return t_[i] ? &t_[i]->storage() : nullptr; }

 protected:
  void fill(int s) {
    HostTensor& t = *t_[size_t(s)];
    if (!is_input_dtype(t.type())) return;
    std::mt19937 rng(1234u + unsigned(s));
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    for (int64_t r = 0; r < t.rows(); ++r)
      for (int64_t i = 0; i < t.cols(); ++i) t.set(r, i, dist(rng));
  }
  int64_t* keep(std::vector<int64_t> v) {
    kept_.push_back(std::move(v));
    return kept_.back().data();
  }

  std::vector<const char*> names_;
  std::vector<std::unique_ptr<HostTensor>> t_;
  std::vector<DLTensor> dl_;
  std::vector<bool> null_;
  std::deque<std::vector<int64_t>> kept_;
};

// ---------------------------------------------------------------- running a call that must fail

// What one entry point did: its status, fusednorm_last_error() after it, and the first byte it
// changed ("" when none).
struct CallResult {
  bool reported = false;
  int32_t status = -1;
  std::string message;
  std::string changes;
};

struct Outcome {
  int signal = 0;  // the child died of this signal (a call crashed or hung)
  CallResult lib, ref;
};

namespace detail {

inline bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = write(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

inline void write_string(int fd, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  write_all(fd, &n, sizeof n);
  write_all(fd, s.data(), n);
}

inline bool read_bytes(const std::string& buf, size_t* pos, void* out, size_t n) {
  if (*pos + n > buf.size()) return false;
  memcpy(out, buf.data() + *pos, n);
  *pos += n;
  return true;
}

inline bool read_string(const std::string& buf, size_t* pos, std::string* out) {
  uint32_t n;
  if (!read_bytes(buf, pos, &n, sizeof n) || *pos + n > buf.size()) return false;
  out->assign(buf.data() + *pos, n);
  *pos += n;
  return true;
}

// Makes one call and records it: its status, the message `last_error` returns after it, and the
// changes since the snapshot taken before the first call.
template <class Fn>
CallResult record(CallUnderTest& c, Fn&& fn, const char* (*last_error)()) {
  CallResult r;
  r.status = fn();
  r.message = last_error();
  r.changes = c.changes();
  r.reported = true;
  return r;
}

inline void send(int fd, const CallResult& r) {
  write_all(fd, &r.status, sizeof r.status);
  write_string(fd, r.message);
  write_string(fd, r.changes);
}

inline bool receive(const std::string& buf, size_t* pos, CallResult* r) {
  r->reported = read_bytes(buf, pos, &r->status, sizeof r->status) && read_string(buf, pos, &r->message) &&
                read_string(buf, pos, &r->changes);
  return r->reported;
}

}  // namespace detail

// Prepares and snapshots the call, then makes it with the library and (where there is one) with
// the reference, in a forked child unless FUSEDNORM_TEST_NO_FORK=1. The library's result is sent
// before the reference runs, so a crash in either is told apart.
inline Outcome run_call(CallUnderTest& c) {
  c.prepare();
  c.snapshot();
  Outcome o;
  auto lib = [&] { return detail::record(c, [&] { return c.call(); }, fusednorm_last_error); };
  // The reference is linked into the test (libfusednorm_reference.a) with its own copy of the
  // error state (libfusednorm.so hides its copy): its message is fusednorm::last_error().
  auto ref = [&] {
    fusednorm::clear_error();
    return detail::record(c, [&] { return c.call_reference(); }, fusednorm::last_error);
  };
  const char* no_fork = getenv("FUSEDNORM_TEST_NO_FORK");
  if (no_fork != nullptr && no_fork[0] == '1') {
    o.lib = lib();
    if (c.has_reference()) o.ref = ref();
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
    detail::send(fds[1], lib());
    if (c.has_reference()) detail::send(fds[1], ref());
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
  if (detail::receive(buf, &pos, &o.lib) && c.has_reference()) detail::receive(buf, &pos, &o.ref);
  return o;
}

// One expected substring of the message, or a set of alternatives (any one of them).
struct Part {
  Part(const char* s) : alts{s} {}         // NOLINT: implicit on purpose
  Part(std::string s) : alts{std::move(s)} {}  // NOLINT
  Part(std::initializer_list<const char*> a) : alts(a.begin(), a.end()) {}
  std::vector<std::string> alts;
};

// The call fails with `want`, its message contains every part, and it writes nothing; the
// reference returns the same status and message and writes nothing (for BACKEND_UNAVAILABLE,
// which the validation does not decide, the reference says it runs on CPU tensors only).
inline void check_rejected(CallUnderTest& c, fusednorm_status want, const std::vector<Part>& parts) {
  const Outcome o = run_call(c);
  INFO("fusednorm_last_error(): \"" << o.lib.message << "\"");
  if (o.signal != 0) {
    FAIL((o.lib.reported ? "the reference call " : "the call ")
         << (o.signal == SIGALRM ? "hung" : "crashed") << " (signal " << o.signal << ", " << strsignal(o.signal)
         << "): the validation let it through and a kernel ran on it");
  }
  REQUIRE(o.lib.reported);
  CHECK(status_name(o.lib.status) == status_name(want));
  for (const Part& p : parts) {
    if (p.alts.size() == 1) {
      CHECK_THAT(o.lib.message, Catch::Contains(p.alts[0]));
    } else {
      bool found = false;
      for (const auto& a : p.alts) found = found || o.lib.message.find(a) != std::string::npos;
      INFO("expected one of the alternatives starting with \"" << p.alts[0] << "\"");
      CHECK(found);
    }
  }
  {
    INFO("writes nothing: " << (o.lib.changes.empty() ? "nothing changed" : o.lib.changes));
    CHECK(o.lib.changes.empty());
  }
  if (!c.has_reference()) return;
  INFO("the reference: \"" << o.ref.message << "\"");
  REQUIRE(o.ref.reported);
  if (want == FUSEDNORM_BACKEND_UNAVAILABLE) {
    CHECK(status_name(o.ref.status) == "UNSUPPORTED");
    CHECK_THAT(o.ref.message, Catch::Contains("the reference runs on CPU tensors only"));
  } else {
    CHECK(status_name(o.ref.status) == status_name(want));
    CHECK(o.ref.message == o.lib.message);
  }
  INFO("the reference writes nothing: " << (o.ref.changes.empty() ? "nothing changed" : o.ref.changes));
  CHECK(o.ref.changes.empty());
}

// ---------------------------------------------------------------- tables of rejected calls

// One row: what is broken (the section's name), how a valid baseline call is broken, and what the
// library must answer.
template <class C>
struct BadCase {
  std::string name;
  std::function<void(C&)> mutate;
  fusednorm_status status;
  std::vector<Part> parts;
};

template <class C>
using BadTable = std::vector<BadCase<C>>;

// Appends rows (tables built from several pieces).
template <class C>
BadTable<C> operator+(BadTable<C> a, const BadTable<C>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs every row on a fresh baseline call from make() (default: C's default constructor), each
// in a DYNAMIC_SECTION named by the row (names must be unique: Catch2 would run a repeated name
// once).
template <class C>
void run_bad_cases(const BadTable<C>& table,
                   const std::function<std::unique_ptr<C>()>& make = [] { return std::make_unique<C>(); }) {
  std::set<std::string> names;
  for (const BadCase<C>& row : table) REQUIRE(names.insert(row.name).second);
  for (const BadCase<C>& row : table) {
    DYNAMIC_SECTION(row.name) {
      INFO("case \"" << row.name << "\": expected " << status_name(row.status));
      std::unique_ptr<C> c = make();
      row.mutate(*c);
      check_rejected(*c, row.status, row.parts);
    }
  }
}

// Mutations of an Args call for table rows (an std::function<void(Args&)> serves as the
// mutation of any Args subclass): one field of one tensor argument set to one value.
namespace mut {
using Mutation = std::function<void(Args&)>;
inline Mutation null(int s) {
  return [=](Args& c) { c.set_null(s); };
}
inline Mutation null_data(int s) {
  return [=](Args& c) { c.dl(s).data = nullptr; };
}
inline Mutation null_shape(int s) {
  return [=](Args& c) { c.dl(s).shape = nullptr; };
}
inline Mutation null_strides(int s) {
  return [=](Args& c) { c.dl(s).strides = nullptr; };
}
inline Mutation shape(int s, std::vector<int64_t> v) {
  return [=](Args& c) { c.set_shape(s, v); };
}
inline Mutation strides(int s, std::vector<int64_t> v) {
  return [=](Args& c) { c.set_strides(s, v); };
}
inline Mutation ndim(int s, int32_t n) {
  return [=](Args& c) { c.dl(s).ndim = n; };
}
inline Mutation dtype(int s, DLDataType t) {
  return [=](Args& c) { c.dl(s).dtype = t; };
}
inline Mutation byte_offset(int s, uint64_t off) {
  return [=](Args& c) { c.dl(s).byte_offset = off; };
}
inline Mutation device(int s, int32_t type, int32_t id) {
  return [=](Args& c) { c.set_device(s, type, id); };
}
inline Mutation all_devices(int32_t type, int32_t id) {
  return [=](Args& c) { c.set_all_devices(type, id); };
}
// Slot s reallocated (and refilled) as a fresh tensor of this dtype and shape.
inline Mutation remake(int s, DType type, std::vector<int64_t> v) {
  return [=](Args& c) { c.make(s, type, v); };
}
// Several mutations, in order.
template <class C>
std::function<void(C&)> all(std::vector<std::function<void(C&)>> steps) {
  return [=](C& c) {
    for (const auto& f : steps) f(c);
  };
}
}  // namespace mut

// ---------------------------------------------------------------- positive controls

// Runs the call on `a` with the library and on `b` (set up identically) with the reference: both
// succeed, every data byte of every tensor is equal, the library wrote something, and no guard
// byte (0xA5 outside a tensor's data) is written.
inline void check_matches_reference(Args& a, Args& b) {
  a.snapshot();
  const fusednorm_status st = a.call();
  INFO("fusednorm_last_error(): \"" << fusednorm_last_error() << "\"");
  REQUIRE(status_name(st) == "SUCCESS");
  REQUIRE(status_name(b.call_reference()) == "SUCCESS");
  CHECK(a.changes() != "");
  for (int s = 0; s < a.slots(); ++s) {
    if (a.ptr(s) == nullptr) continue;
    HostTensor& ta = a.tensor(s);
    HostTensor& tb = b.tensor(s);
    INFO("slot " << s << " (" << a.name(s) << ")");
    REQUIRE(ta.data_bytes() == tb.data_bytes());
    CHECK(memcmp(ta.data_begin(), tb.data_begin(), ta.data_bytes()) == 0);
    const uint8_t* base = ta.storage().data();
    const size_t begin = size_t(ta.data_begin() - base), end = begin + ta.data_bytes();
    size_t touched = 0;
    for (size_t i = 0; i < ta.storage().size(); ++i)
      if ((i < begin || i >= end) && base[i] != 0xA5) ++touched;
    CHECK(touched == 0);
  }
}

// A table of valid calls: {name, setup applied to a fresh baseline call}.
template <class C>
struct Control {
  std::string name;
  std::function<void(C&)> setup;
};

template <class C>
void run_controls(const std::vector<Control<C>>& table,
                  const std::function<std::unique_ptr<C>()>& make = [] { return std::make_unique<C>(); }) {
  for (const Control<C>& row : table) {
    DYNAMIC_SECTION(row.name) {
      std::unique_ptr<C> a = make(), b = make();
      row.setup(*a);
      row.setup(*b);
      check_matches_reference(*a, *b);
    }
  }
}

}  // namespace test
}  // namespace fusednorm
