#include "longhaul/common/clock.h"

namespace longhaul {

double SystemClock::UnixSeconds() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace longhaul
