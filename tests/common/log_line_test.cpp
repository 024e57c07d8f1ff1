#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "longhaul/common/log_line.h"

using namespace longhaul;

namespace {

// Points stderr at a pipe while it lives; the pipe's read end is non-blocking.
class StderrPipe {
 public:
  StderrPipe() {
    REQUIRE(::pipe(fds_) == 0);
    REQUIRE(::fcntl(fds_[0], F_SETFL, O_NONBLOCK) == 0);
    saved_ = ::dup(STDERR_FILENO);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(fds_[1], STDERR_FILENO) == STDERR_FILENO);
  }
  ~StderrPipe() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // What the pipe holds now (nothing waits for more).
  std::string Take() {
    std::string out;
    char buf[256];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
  int saved_ = -1;
};

}  // namespace

TEST_CASE("LogLine writes nothing until the line is whole, then the line and its newline at once",
          "[log_line]") {
  StderrPipe err;
  {
    LogLine line;
    line << "round " << 3 << " epoch " << 7u << ": hash " << 0.5;
    // With std::cerr each piece would already be in the pipe, where a script
    // writing to the same log could land between them.
    CHECK(err.Take().empty());
  }
  CHECK(err.Take() == "round 3 epoch 7: hash 0.5\n");
  LogLine() << "second";
  CHECK(err.Take() == "second\n");
}
