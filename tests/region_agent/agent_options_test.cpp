// The agent's options: the worker socket's address and the launcher's options
// are checked once, naming the flag.
#include <catch2/catch.hpp>

#include "longhaul/region_agent/agent_options.h"

namespace ra = longhaul::region_agent;

namespace {
ra::AgentOptions Valid() {
  ra::AgentOptions o;
  o.region = "eu";
  o.orchestrator = "tcp://127.0.0.1:7000";
  o.insecure = true;
  o.work_dir = "/tmp/unused";
  return o;
}
}  // namespace

TEST_CASE("region_agent: agent options take an address of this host for the worker socket, no wildcard", "[options]") {
  auto o = Valid();
  CHECK(o.Validate().ok());
  o.worker_bind = "10.1.2.3";
  CHECK(o.Validate().ok());
  for (const char* bad : {"", "*", "0.0.0.0", "10.1.2.3:5555"}) {
    INFO(bad);
    o.worker_bind = bad;
    CHECK_THAT(o.Validate().message(), Catch::StartsWith("--worker-bind '" + std::string(bad) + "' must be one"));
  }
}

TEST_CASE("region_agent: agent options check the slurm launcher's options, naming the launcher", "[options]") {
  auto o = Valid();
  o.launcher.kind = ra::LauncherKind::kSlurm;
  CHECK(o.Validate().ok());
  o.launcher.slurm.nodes = 2;
  CHECK_THAT(o.Validate().message(), Catch::StartsWith("--slurm-nodes 2 puts workers on other hosts: they need --data-host auto"));
  o.data_host = "auto";
  CHECK_THAT(o.Validate().message(), Catch::StartsWith("--slurm-nodes 2 puts workers on other hosts"));  // loopback socket
  o.worker_bind = "10.1.2.3";
  CHECK(o.workers_may_be_remote());
  CHECK(o.Validate().ok());
  o.launcher.slurm.partition = "a b";
  CHECK_THAT(o.Validate().message(), Catch::StartsWith("--launcher slurm: slurm partition 'a b' has a character"));
}
