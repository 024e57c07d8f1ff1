// LogLine: one line to stderr in one write(2).
//
//   LogLine() << "round " << round << ": rolled back (" << why << ")";
//
// std::cerr is unbuffered, so `std::cerr << a << b << "\n"` writes each piece on
// its own, and whatever else appends to the same file (a worker's own script
// writes its lines to the log the worker library writes to) can land between
// the pieces, in the middle of a line. LogLine collects the pieces and writes
// the line, newline included, when it goes out of scope.
#pragma once

#include <sstream>

namespace longhaul {

class LogLine {
 public:
  LogLine() = default;
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  ~LogLine();

  template <class T>
  LogLine& operator<<(const T& value) {
    text_ << value;
    return *this;
  }

 private:
  std::ostringstream text_;
};

}  // namespace longhaul
