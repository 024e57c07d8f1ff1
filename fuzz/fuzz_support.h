// Shared helpers of the libFuzzer targets (header-only, no state of their own
// beyond one temporary folder per process).
#pragma once

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "longhaul/common/checksum.h"

namespace longhaul::fuzz {

// Crashes the input on a broken invariant (libFuzzer reports it as a crash with
// the input saved). Use for properties the code documents, never for "an error
// was returned".
#define LONGHAUL_FUZZ_CHECK(cond)                                                   \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      __builtin_trap();                                                             \
    }                                                                               \
  } while (0)

// Logs would dominate the run time (every rejected input logs a warning).
// Targets that link protobuf also call SilenceProtobufLogs (fuzz_proto.h).
inline void SilenceLogs() { spdlog::set_level(spdlog::level::off); }

// Consumes an input front to back; reads past the end yield zeros / empty.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  size_t left() const { return n_; }
  uint8_t U8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  uint32_t U32() { return static_cast<uint32_t>(U16()) | (static_cast<uint32_t>(U16()) << 16); }
  std::string_view Bytes(size_t want) {
    const size_t k = want < n_ ? want : n_;
    std::string_view out(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    n_ -= k;
    return out;
  }
  std::string_view Rest() { return Bytes(n_); }

 private:
  const uint8_t* p_;
  size_t n_;
};

// A well-formed "LHF1" frame around arbitrary payload bytes (proto/frame.h):
// lets the fuzzer reach the protobuf parser and the handlers behind the XXH3 check.
inline std::string WrapFrame(std::string_view payload) {
  std::string out("LHF1", 4);
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(payload.size(), 4);
  put(Checksum64(payload), 8);
  out.append(payload);
  return out;
}

// One folder per fuzzer process under $TMPDIR (or /tmp), removed at normal exit
// (libFuzzer exits through exit() when -max_total_time or -runs ends). A crash
// leaves it behind; fuzz/run.sh points TMPDIR at a folder it removes itself.
class ProcessTempDir {
 public:
  static const std::filesystem::path& Get() {
    static ProcessTempDir dir;
    return dir.path_;
  }
  ~ProcessTempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }

 private:
  ProcessTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/longhaul-fuzz-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = templ;
  }
  std::filesystem::path path_;
};

}  // namespace longhaul::fuzz
