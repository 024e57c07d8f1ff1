// RealCluster: the real longhaul-orchestrator and one longhaul-agent per
// region (with their workers, and longhaul-linkem links when WAN emulation is
// on) in a temp directory, for end-to-end, SDK and chaos tests. Every wait is
// bounded; everything is killed and reaped and the directory removed at the
// end (kept with LONGHAUL_KEEP_TEST_DIRS).
//
// Tests wait for the event they check, never for the end of a job that might
// come first: a rejoin test runs a job far longer than it needs, injects the
// fault, waits with WaitForRejoin() until the rounds table shows the region
// gone and back, checks, then cancels the job.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "longhaul/orchestrator/region_netns.h"
#include "longhaul/orchestrator/state_store.h"

namespace longhaul::testing {

inline const std::vector<std::string> kClusterRegions = {"eu-west", "us-east", "ap-south"};

struct RealClusterOptions {
  std::vector<std::string> agent_flags;  // extra flags for every agent (e.g. WAN emulation)
  // The orchestrator's round timeout: every agent and worker gets the
  // orchestrator's timeouts with the job's assignment.
  int round_timeout_s = 60;
  // The users' programs the agents run (--allow-command) and the folders they
  // may run in; the SDK tests' defaults: Debian's Python, the C test workers, examples/.
  std::vector<std::string> allow_commands = {"/usr/bin/python3", std::string(LONGHAUL_BIN_DIR) + "/c_replay_worker",
                                             std::string(LONGHAUL_BIN_DIR) + "/c_features_worker",
                                             std::string(LONGHAUL_BIN_DIR) + "/builtin_twin_worker"};
  std::vector<std::string> allow_working_dirs = {std::string(LONGHAUL_SOURCE_DIR) + "/examples"};
  int workers = 1;                       // worker slots per agent
  // Agents (and their workers) see the machine's GPUs. Off, they are started
  // with CUDA_VISIBLE_DEVICES empty, so a test means the same on a machine
  // with a GPU as on one without (regions on Gloo, the host trainer).
  bool gpus = false;
  // Each region on a host of its own (root): a network namespace with its own
  // address, the orchestrator on the bridge that joins them (RegionNetworks).
  bool netns = false;
};

struct RealCluster {
  TempDir tmp;  // declared first: removed after every process below is gone
  fs::path dir;
  RealClusterOptions options;
  Subprocess orchestrator;
  orchestrator::EndpointInfo ep;
  std::map<std::string, Subprocess> agents;
  std::unique_ptr<orchestrator::RegionNetworks> networks;  // options.netns

  explicit RealCluster(const std::string& tag, RealClusterOptions o = {});
  ~RealCluster();

  // "" = any port on 127.0.0.1 (on the bridge with netns).
  void StartOrchestrator(const std::string& bind = "");
  void StartAgent(const std::string& region);
  // A control client with keys/<key>.key: "cli" (an admin), "user-a" or "user-b".
  std::unique_ptr<orchestrator::ControlClient> Client(const std::string& key = "cli") const;
  // A 3-region DiLoCo+int8 job on the tiny preset (min_regions 2).
  v1::JobSpec Spec(uint32_t rounds, uint32_t inner_steps) const;
  std::string Submit(const v1::JobSpec& spec, const std::string& key = "cli") const;
  std::string Submit(uint32_t rounds, uint32_t inner_steps) const { return Submit(Spec(rounds, inner_steps)); }
  // Polls the job's status until pred holds or `limit` passes; returns the last status.
  template <typename Pred>
  v1::JobStatus WaitFor(const std::string& job, Pred pred, std::chrono::seconds limit,
                        const std::string& key = "cli") const {
    auto client = Client(key);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    v1::JobStatus s;
    while (std::chrono::steady_clock::now() < deadline) {
      v1::ControlMessage req;
      req.mutable_job_status_request()->set_job_id(job);
      auto reply = client->Call(req);
      if (reply.ok()) {
        s = reply->job_status();
        if (pred(s)) return s;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return s;
  }
  std::vector<orchestrator::CommittedRound> Rounds(const std::string& job) const;
  std::vector<orchestrator::EventRecord> Events(const std::string& job) const;
  // Polls the job's committed rounds until pred holds or `limit` passes;
  // returns the last rounds read.
  template <typename Pred>
  std::vector<orchestrator::CommittedRound> WaitForRounds(const std::string& job, Pred pred,
                                                          std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<orchestrator::CommittedRound> rounds;
    while (std::chrono::steady_clock::now() < deadline) {
      rounds = Rounds(job);
      if (pred(rounds)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return rounds;
  }
  // Polls the job's events, reason and worker output (as an admin sees them)
  // until `needle` shows up or 60 s pass; returns the last text read.
  std::string WaitForText(const std::string& job, const std::string& needle) const;
  // Cancels the job and waits (bounded) until it has ended; returns its status.
  v1::JobStatus Cancel(const std::string& job) const;
};

// A region's absence and return in a job's rounds table: the first round
// committed without `region`, and the first round after it committed with it.
struct Rejoin {
  const orchestrator::CommittedRound* without = nullptr;
  const orchestrator::CommittedRound* back = nullptr;
  explicit operator bool() const { return without && back; }
};
Rejoin FindRejoin(const std::vector<orchestrator::CommittedRound>& rounds, const std::string& region,
                  uint32_t after_round = 0);
// Waits until the job's rounds after `after_round` show `region` gone and back
// (FindRejoin), or `limit` passes; returns the rounds read last.
std::vector<orchestrator::CommittedRound> WaitForRejoin(const RealCluster& c, const std::string& job,
                                                        const std::string& region, uint32_t after_round,
                                                        std::chrono::seconds limit);

inline bool JobDone(const v1::JobStatus& s) { return orchestrator::IsTerminalJobState(s.state()); }

}  // namespace longhaul::testing
