// The agent reads its workers' log tails from a folder the worker can write:
// nothing placed there can hang it, make it read gigabytes, follow a link, or
// put terminal escapes into a job's reason.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "longhaul/region_agent/child_process.h"
#include "support/temp_dir.h"

using longhaul::region_agent::ChildProcess;
using longhaul::testing::TempDir;

TEST_CASE("region_agent: a log tail is the last lines of a regular file, control characters replaced", "[log_tail]") {
  const TempDir tmp("log-tail");
  const auto log = tmp.path() / "worker-0.log";
  std::ofstream(log) << "one\n\ntwo\nthree \x1b[31mred\x1b[0m\tok\x07\n";
  CHECK(ChildProcess::LogTail(log, 2) == "two\nthree ?[31mred?[0m\tok?");
  CHECK(ChildProcess::LogTail(tmp.path() / "missing.log").empty());
}

TEST_CASE("region_agent: a FIFO, a symlink or a huge sparse file in the job folder is not a problem", "[log_tail]") {
  const TempDir tmp("log-tail-hostile");
  const auto fifo = tmp.path() / "worker-0.log";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(ChildProcess::LogTail(fifo) ==
        "(worker-0.log is not a regular file of the agent's with a single name: not read)");  // returns: no writer needed
  std::ofstream(tmp.path() / "secret") << "the agent's secret key\n";
  const auto link = tmp.path() / "worker-1.log";
  std::filesystem::create_symlink(tmp.path() / "secret", link);
  CHECK(ChildProcess::LogTail(link) == "(worker-1.log is a symbolic link: not read)");
  // 4 GiB that take no disk: only the end is read.
  const auto sparse = tmp.path() / "worker-2.log";
  {
    std::ofstream(sparse) << "";
  }
  REQUIRE(::truncate(sparse.c_str(), off_t{4} << 30) == 0);
  {
    std::ofstream out(sparse, std::ios::app);
    out << "\nthe last line\n";
  }
  CHECK(ChildProcess::LogTail(sparse, 1) == "the last line");
  // A hard link to a file elsewhere (where the kernel allows one): not read.
  const auto hard = tmp.path() / "worker-3.log";
  std::filesystem::create_hard_link(tmp.path() / "secret", hard);
  CHECK(ChildProcess::LogTail(hard) == "(worker-3.log is not a regular file of the agent's with a single name: not read)");
  INFO("all three took " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
}
