// The agent's operator decides which users' programs run: the policy resolves
// a job's program and folder the way exec and chdir would and compares what
// would really run.
#include "longhaul/region_agent/command_policy.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

#include "support/temp_dir.h"

namespace lr = longhaul::region_agent;
namespace fs = std::filesystem;
using longhaul::StatusCode;
using longhaul::testing::TempDir;

namespace {

longhaul::worker::JobConfig Command(std::vector<std::string> argv, std::string working_dir = "",
                                    std::map<std::string, std::string> env = {}) {
  longhaul::worker::JobConfig job;
  job.command = longhaul::worker::JobConfig::CommandWorker{};
  job.command->argv = std::move(argv);
  job.command->working_dir = std::move(working_dir);
  job.command->env = std::move(env);
  return job;
}

fs::path Program(const fs::path& p) {
  std::ofstream(p) << "#!/bin/sh\nexit 0\n";
  ::chmod(p.c_str(), 0755);
  return p;
}

}  // namespace

TEST_CASE("command policy: nothing runs unless allowed, the built-in trainer always does", "[command_policy]") {
  const lr::CommandPolicy none;
  auto r = none.Check(Command({"/bin/sh", "-c", "id"}), "eu");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kPermissionDenied);
  CHECK_THAT(r.status().message(), Catch::Contains("region eu runs no user programs") && Catch::Contains("--allow-command"));
  CHECK(none.Check(longhaul::worker::JobConfig{}, "eu").ok());
}

TEST_CASE("command policy: the program exec would run must be an allowed one, links resolved", "[command_policy]") {
  const TempDir tmp("command-policy");
  const fs::path bin = tmp.path() / "bin";
  fs::create_directories(bin);
  const fs::path train = Program(bin / "train");
  const fs::path other = Program(bin / "other");
  fs::create_symlink(train, bin / "alias");
  const lr::CommandPolicy policy{{train}, {}};
  CHECK(*policy.Check(Command({train.string()}), "eu") == fs::canonical(train));
  // By name, on the job's own PATH: resolved to the file that would run.
  CHECK(*policy.Check(Command({"train"}, "", {{"PATH", bin.string()}}), "eu") == fs::canonical(train));
  // A link to an allowed program is that program; a link to another one is not.
  CHECK(*policy.Check(Command({(bin / "alias").string()}), "eu") == fs::canonical(train));
  auto refused = policy.Check(Command({"other"}, "", {{"PATH", bin.string()}}), "eu");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("'other' (" + fs::canonical(other).string() + ")") &&
                                             Catch::Contains("not a program region eu's agent allows"));
  // A job that puts its own folder first on PATH does not get its own 'train'.
  const fs::path mine = tmp.path() / "mine";
  fs::create_directories(mine);
  Program(mine / "train");
  CHECK_FALSE(policy.Check(Command({"train"}, "", {{"PATH", mine.string() + ":" + bin.string()}}), "eu").ok());
  CHECK_THAT(policy.Check(Command({"no-such-program"}), "eu").status().message(), Catch::Contains("is not a program"));
}

TEST_CASE("command policy: a working directory must be an allowed folder or inside one", "[command_policy]") {
  const TempDir tmp("command-policy-dirs");
  const fs::path train = Program(tmp.path() / "train");
  const fs::path jobs = tmp.path() / "jobs";
  fs::create_directories(jobs / "charlm");
  const lr::CommandPolicy policy{{train}, {jobs}};
  CHECK(policy.Check(Command({train.string()}), "eu").ok());  // the job's own folder
  CHECK(policy.Check(Command({train.string()}, (jobs / "charlm").string()), "eu").ok());
  CHECK(policy.Check(Command({train.string()}, jobs.string()), "eu").ok());
  for (const std::string& dir : std::vector<std::string>{"/", "/etc", (jobs / "charlm/../../").string(), jobs.string() + "-evil"}) {
    INFO(dir);
    fs::create_directories(jobs.string() + "-evil");
    auto r = policy.Check(Command({train.string()}, dir), "eu");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("outside the folders region eu's agent allows"));
  }
  fs::create_symlink("/etc", jobs / "etc");  // a link out of an allowed folder leads out of it
  CHECK_FALSE(policy.Check(Command({train.string()}, (jobs / "etc").string()), "eu").ok());
}
