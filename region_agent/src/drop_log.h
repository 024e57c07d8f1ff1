// DropLog: what the agent drops on its worker socket (frames that do not decode,
// hellos without their launch's token, messages from connections that never
// said hello), logged so that a flood cannot fill the disk: the first drop of
// each interval is logged with its reason; the rest are counted, and the count
// leads the next drop logged.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace longhaul::region_agent {

class DropLog {
 public:
  explicit DropLog(std::chrono::milliseconds interval = std::chrono::seconds(1)) : interval_(interval) {}

  void Drop(const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) {
      ++suppressed_;
      return;
    }
    if (suppressed_ > 0) {
      spdlog::warn("worker socket: {} more frame(s) dropped since the last such line", suppressed_);
    }
    spdlog::warn("worker socket: dropped {}", what);
    suppressed_ = 0;
    next_ = now + interval_;
  }

 private:
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_{};
  uint64_t suppressed_ = 0;
};

}  // namespace longhaul::region_agent
