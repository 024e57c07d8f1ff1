// The launcher kinds' table and options, and the per-task environment
// longhaul-task computes from srun's variables.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "longhaul/region_agent/worker_launcher.h"

namespace ra = longhaul::region_agent;

namespace {

using Env = std::map<std::string, std::string>;

longhaul::Result<Env> TaskEnv(const Env& vars) {
  auto out = ra::SlurmTaskEnvironment([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  if (!out.ok()) return out.status();
  return Env(out->begin(), out->end());
}

Env Task(int rank, int local, int node, const std::string& per_node, int tasks, const std::string& tokens) {
  return {{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_LOCALID", std::to_string(local)},
          {"SLURM_NODEID", std::to_string(node)}, {"SLURM_STEP_TASKS_PER_NODE", per_node},
          {"SLURM_NTASKS", std::to_string(tasks)}, {ra::kWorkerTokensVariable, tokens}};
}

}  // namespace

TEST_CASE("region_agent: launcher kinds parse from their names, an unknown one lists the names", "[launcher]") {
  for (const auto& row : ra::kLauncherKinds) {
    auto kind = ra::ParseLauncherKind(row.name);
    REQUIRE(kind.ok());
    CHECK(*kind == row.kind);
    CHECK(ra::LauncherKindName(row.kind) == row.name);
  }
  auto bad = ra::ParseLauncherKind("pbs");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "launcher 'pbs' is not one of local, slurm");
}

TEST_CASE("region_agent: slurm options refuse bad counts and anything that is not one srun value", "[launcher]") {
  ra::LauncherOptions o;
  o.kind = ra::LauncherKind::kSlurm;
  CHECK(o.Validate().ok());
  o.slurm.partition = "gpu-a100";
  o.slurm.time_limit = "1-02:00:00";
  CHECK(o.Validate().ok());
  o.slurm.nodes = 0;
  CHECK(o.Validate().message() == "slurm nodes must be >= 1, got 0");
  o.slurm.nodes = 2;  // whether the workers may leave the agent's host is the agent's to check
  CHECK(o.Validate().ok());
  o.slurm.nodes = 1;
  o.slurm.ntasks_per_node = -1;
  CHECK(o.Validate().message().find("ntasks-per-node must be >= 0") != std::string::npos);
  o.slurm.ntasks_per_node = 0;
  o.slurm.account = "ml --uid=0";
  CHECK(o.Validate().message().find("slurm account 'ml --uid=0' has a character") == 0);
  // The local launcher has no Slurm options to check.
  o.kind = ra::LauncherKind::kLocal;
  CHECK(o.Validate().ok());
}

TEST_CASE("region_agent: longhaul-task gives each srun task its rank, local rank and own token", "[launcher]") {
  // 5 tasks: 2 on each of the first two nodes, 1 on the third.
  auto first = TaskEnv(Task(0, 0, 0, "2(x2),1", 5, "t0,t1,t2,t3,t4"));
  REQUIRE(first.ok());
  CHECK(*first == Env{{"LONGHAUL_RANK", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "5"}, {"LOCAL_RANK", "0"},
                      {"LOCAL_WORLD_SIZE", "2"}, {"LONGHAUL_WORKER_TOKEN", "t0"}});
  auto third = TaskEnv(Task(3, 1, 1, "2(x2),1", 5, "t0,t1,t2,t3,t4"));
  REQUIRE(third.ok());
  CHECK((*third)["RANK"] == "3");
  CHECK((*third)["LOCAL_RANK"] == "1");
  CHECK((*third)["LOCAL_WORLD_SIZE"] == "2");
  CHECK((*third)["LONGHAUL_WORKER_TOKEN"] == "t3");
  auto last = TaskEnv(Task(4, 0, 2, "2(x2),1", 5, "t0,t1,t2,t3,t4"));
  REQUIRE(last.ok());
  CHECK((*last)["LOCAL_WORLD_SIZE"] == "1");
  CHECK((*last)["LONGHAUL_WORKER_TOKEN"] == "t4");
}

TEST_CASE("region_agent: longhaul-task refuses a task environment it cannot trust, naming the variable", "[launcher]") {
  Env missing = Task(0, 0, 0, "2", 2, "a,b");
  missing.erase("SLURM_PROCID");
  CHECK(TaskEnv(missing).status().message().find("SLURM_PROCID is not set") == 0);
  CHECK(TaskEnv(Task(0, 0, 0, "2", 2, "a,b,c")).status().message() ==
        "LONGHAUL_WORKER_TOKENS has 3 tokens for SLURM_NTASKS 2 tasks");
  CHECK(TaskEnv(Task(2, 0, 0, "2", 2, "a,b")).status().message().find("outside the step's 2 tasks") != std::string::npos);
  CHECK(TaskEnv(Task(0, 0, 3, "2(x2)", 4, "a,b,c,d")).status().message() ==
        "SLURM_STEP_TASKS_PER_NODE '2(x2)' lists 2 nodes, SLURM_NODEID is 3");
  for (const char* bad : {"", "x", "2(x", "2(x0)", "2(3)", "2,,1"}) {
    INFO(bad);
    CHECK(TaskEnv(Task(0, 0, 0, bad, 1, "a")).status().message().find("is malformed") != std::string::npos);
  }
  Env rank = Task(0, 0, 0, "1", 1, "a");
  rank["SLURM_PROCID"] = "-1";
  CHECK(TaskEnv(rank).status().message() == "SLURM_PROCID must be a non-negative integer, got '-1'");
  Env no_tokens = Task(0, 0, 0, "1", 1, "a");
  no_tokens.erase(ra::kWorkerTokensVariable);
  CHECK(TaskEnv(no_tokens).status().message().find("LONGHAUL_WORKER_TOKENS is not set") == 0);
}
