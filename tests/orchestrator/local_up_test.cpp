// `longhaul up` / `longhaul down` as a user runs them: the real CLI starts a
// local cluster in the background, the user's job runs on it through the CLI
// with the printed environment and no flags, and `down` stops exactly what
// `up` started.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <fstream>
#include <map>
#include <sstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

using namespace longhaul::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;
const std::string kCli = kBin + "/longhaul";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Recorded {
  pid_t pid;
  std::string start_time;
};

// The manifest `up` wrote: "PID START_TIME NAME" per line.
std::vector<Recorded> Manifest(const fs::path& dir) {
  std::vector<Recorded> out;
  std::istringstream in(ReadFile(dir / "up.processes"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    Recorded r{};
    f >> r.pid >> r.start_time;
    out.push_back(r);
  }
  return out;
}

bool Alive(const Recorded& r) {
  for (const auto& p : ListProcesses())
    if (p.pid == r.pid && p.start_time == r.start_time) return true;
  return false;
}

}  // namespace

TEST_CASE("longhaul up runs your job on a local cluster with no flags, longhaul down stops exactly it", "[cli][up]") {
  const TempDir tmp("up");
  const fs::path dir = tmp.path() / "cluster";
  // A process `down` must leave alone, though it is ours too.
  auto bystander = Subprocess::Spawn({"/bin/sleep", "600"});
  REQUIRE(bystander.ok());
  // Whatever happens below, the cluster is stopped.
  struct Down {
    fs::path dir;
    ~Down() {
      std::string ignored;
      if (fs::exists(dir / "up.processes")) RunCommand(kCli + " down --dir " + dir.string(), &ignored, 60s);
    }
  } down_guard{dir};

  std::string env_out;
  const int up = RunCommand(kCli + " up --regions 2 --dir " + dir.string() + " 2>" + (tmp.path() / "up.err").string(),
                            &env_out, 120s);
  INFO("up: " << env_out << ReadFile(tmp.path() / "up.err"));
  REQUIRE(up == 0);
  std::map<std::string, std::string> env;
  std::istringstream lines(env_out);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (line.rfind("export ", 0) == 0 && eq != std::string::npos) env[line.substr(7, eq - 7)] = line.substr(eq + 1);
  }
  REQUIRE(env.size() == 3);
  CHECK(env["LONGHAUL_ORCHESTRATOR"].rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(fs::exists(env["LONGHAUL_KEY"]));
  CHECK(fs::exists(env["LONGHAUL_SERVER_KEY"]));
  CHECK(ReadFile(dir / "env") == env_out);
  const auto recorded = Manifest(dir);
  REQUIRE(recorded.size() == 3);  // the orchestrator and two agents, running after `up` exited
  for (const auto& r : recorded) CHECK(Alive(r));

  // The user's job through the CLI, with the environment and no flags.
  std::ofstream(tmp.path() / "job.yaml") << "name: mine\nrounds: 2\nregion_count: 2\nsync: {inner_steps: 5}\n";
  std::string exports;
  for (const auto& [k, v] : env) exports += k + "=" + v + " ";
  std::string out;
  const int submitted = RunCommand(exports + kCli + " submit --watch " + (tmp.path() / "job.yaml").string(), &out, 180s);
  INFO("submit: " << out << " (logs in " << (dir / "logs") << ")");
  CHECK(submitted == 0);  // --watch exits 0 only when the job succeeded
  out.clear();
  CHECK(RunCommand(exports + kCli + " jobs", &out, 30s) == 0);
  CHECK_THAT(out, Catch::Contains("mine") && Catch::Contains("succeeded"));
  // A second `up` on the same folder is refused while the cluster runs.
  out.clear();
  CHECK(RunCommand(kCli + " up --dir " + dir.string(), &out, 60s) == 1);
  CHECK_THAT(out, Catch::Contains("already up"));

  out.clear();
  REQUIRE(RunCommand(kCli + " down --dir " + dir.string(), &out, 60s) == 0);
  CHECK_THAT(out, Catch::Contains("stopped 3 process(es)"));
  // This test is the processes' subreaper once `up` exited: reap what `down` ended.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  for (const auto& r : recorded) CHECK_FALSE(Alive(r));
  CHECK_FALSE(fs::exists(dir));
  CHECK_FALSE(bystander->Wait(0ms).has_value());  // still running: `down` touched nothing else
  out.clear();
  CHECK(RunCommand(kCli + " down --dir " + dir.string(), &out, 60s) == 1);
  CHECK_THAT(out, Catch::Contains("no local cluster in"));
}
