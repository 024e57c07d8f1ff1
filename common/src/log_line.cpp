#include "longhaul/common/log_line.h"

#include <unistd.h>

#include <cerrno>
#include <string>

namespace longhaul {

LogLine::~LogLine() {
  text_ << '\n';
  const std::string line = text_.str();
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to log to: nothing else to do
    done += static_cast<size_t>(n);
  }
}

}  // namespace longhaul
