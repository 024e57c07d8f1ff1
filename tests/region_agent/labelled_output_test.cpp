// srun --label's output split into the agent's log files: each task's lines,
// label removed, in worker-<task>.log; srun's own lines in srun.log.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "longhaul/region_agent/labelled_output.h"
#include "support/temp_dir.h"

namespace ra = longhaul::region_agent;
using longhaul::testing::TempDir;

namespace {

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    REQUIRE(n > 0);
    done += static_cast<size_t>(n);
  }
}

// A splitter over a pipe the test writes into: Write() sends text, Finish()
// closes the write end (as srun's exit does) and waits until every line is in
// its file.
class Splitter {
 public:
  Splitter(const std::filesystem::path& dir, int tasks) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    write_fd_ = fds[1];
    auto started = ra::LabelledOutput::Start(fds[0], dir, tasks);
    REQUIRE(started.ok());
    out_ = std::move(*started);
  }
  ~Splitter() { CloseWriter(); }
  int write_fd() const { return write_fd_; }
  void Write(const std::string& text) { WriteAll(write_fd_, text); }
  void CloseWriter() {
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
  }
  bool Drained() { return out_->WaitDrained(longhaul::DeadlineAfter(std::chrono::seconds(10))); }
  void Finish() {
    CloseWriter();
    REQUIRE(Drained());
  }
  const ra::LabelledOutput& out() const { return *out_; }

 private:
  int write_fd_ = -1;
  std::unique_ptr<ra::LabelledOutput> out_;
};

}  // namespace

TEST_CASE("region_agent: a task label is the task number and a colon, padding allowed", "[launcher]") {
  auto one = ra::SplitTaskLabel("1: loss 2.3\n");
  REQUIRE(one);
  CHECK(one->first == 1);
  CHECK(one->second == "loss 2.3\n");
  auto padded = ra::SplitTaskLabel(" 12: round 3: hash ab\n");
  REQUIRE(padded);
  CHECK(padded->first == 12);
  CHECK(padded->second == "round 3: hash ab\n");
  auto bare = ra::SplitTaskLabel("0:\n");
  REQUIRE(bare);
  CHECK(bare->second == "\n");
  CHECK_FALSE(ra::SplitTaskLabel("srun: error: n1: task 1: Killed\n"));
  CHECK_FALSE(ra::SplitTaskLabel(": nothing\n"));
  CHECK_FALSE(ra::SplitTaskLabel("12345678: too long a number\n"));
  CHECK_FALSE(ra::SplitTaskLabel("7\n"));
  CHECK_FALSE(ra::SplitTaskLabel(""));
}

TEST_CASE("region_agent: srun's labelled output goes to each task's log and srun's own lines to srun.log",
          "[launcher]") {
  const TempDir tmp("labelled");
  Splitter splitter(tmp.path(), 2);
  // Lines arrive in pieces that split them anywhere; a task beyond the launch's
  // and an unlabelled line are srun's.
  splitter.Write("0: step 1 loss 2.");
  splitter.Write("5\n1: Traceback (most recent call last):\nsrun: error: n1: task 1: Exited with exit code 1\n");
  splitter.Write("3: not a task of this launch\n");
  // slurmstepd's notice arrives as a task's stderr: Slurm's words, kept in srun.log too.
  splitter.Write("1: slurmstepd-n1: error: *** STEP 7.0 ON n1 CANCELLED AT 2026-12-07T02:54:20 DUE TO PREEMPTION ***\n");
  splitter.Write("srun: error: n1: task 1: Terminated\n0: last words without a newline");
  splitter.Finish();
  // The last line, cut short, is ended: a relaunch appends on a line of its own.
  CHECK(Read(tmp.path() / "worker-0.log") == "step 1 loss 2.5\nlast words without a newline\n");
  const std::string notice =
      "slurmstepd-n1: error: *** STEP 7.0 ON n1 CANCELLED AT 2026-12-07T02:54:20 DUE TO PREEMPTION ***\n";
  CHECK(Read(tmp.path() / "worker-1.log") == "Traceback (most recent call last):\n" + notice);
  CHECK(Read(tmp.path() / "srun.log") == "srun: error: n1: task 1: Exited with exit code 1\n"
                                         "3: not a task of this launch\n" + notice +
                                         "srun: error: n1: task 1: Terminated\n");
  // What Slurm said last: srun's last error, slurmstepd's notice.
  CHECK(splitter.out().SlurmReason() ==
        "error: n1: task 1: Terminated; STEP 7.0 ON n1 CANCELLED AT 2026-12-07T02:54:20 DUE TO PREEMPTION");
}

TEST_CASE("region_agent: a launch Slurm said nothing about has no reason", "[launcher]") {
  const TempDir tmp("labelled-quiet");
  Splitter splitter(tmp.path(), 1);
  splitter.Write("0: *** not Slurm's ***\n0: srun: error: a task's own text\n");
  splitter.Finish();
  CHECK(splitter.out().SlurmReason().empty());
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "srun.log"));
}

TEST_CASE("region_agent: a log that is a link is not written through", "[launcher]") {
  const TempDir tmp("labelled-link");
  std::ofstream(tmp.path() / "target") << "";
  std::filesystem::create_symlink(tmp.path() / "target", tmp.path() / "worker-0.log");
  Splitter splitter(tmp.path(), 1);
  splitter.Write("0: secret\n");
  splitter.Finish();
  CHECK(Read(tmp.path() / "target").empty());
}

TEST_CASE("region_agent: a line longer than the splitter's piece stays with its task", "[launcher]") {
  const TempDir tmp("labelled-long");
  Splitter splitter(tmp.path(), 2);
  // A progress bar without newlines: 200 KiB in one line, in pieces of 4 KiB,
  // some of which start like a label.
  std::string line(200 * 1024, '#');
  for (size_t i = 0; i < line.size(); i += 4096) line.replace(i, 3, "0: ");
  const std::string text = "1: " + line + "\n0: next\n";
  bool written = true;  // no Catch assertion in the writer thread
  std::thread writer([&] {
    for (size_t done = 0; done < text.size() && written;) {
      const ssize_t n = ::write(splitter.write_fd(), text.data() + done, std::min<size_t>(4096, text.size() - done));
      written = n > 0;
      done += n > 0 ? static_cast<size_t>(n) : 0;
    }
    splitter.CloseWriter();
  });
  const bool drained = splitter.Drained();
  writer.join();
  REQUIRE(written);
  REQUIRE(drained);
  CHECK(Read(tmp.path() / "worker-1.log") == line + "\n");
  CHECK(Read(tmp.path() / "worker-0.log") == "next\n");
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "srun.log"));
}
