// Test harness for the orchestrator's integration tests: keys, a fake region
// agent (a thread speaking the control protocol), and a tiny HTTP GET for
// /metrics. Processes and folders come from support/subprocess.h. Every wait
// is bounded.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/orchestrator/control_client.h"
#include "longhaul/orchestrator/endpoint_file.h"
#include "longhaul/wan_transport/curve.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace longhaul::testing {

namespace fs = std::filesystem;

// keys/<name>.key|.pub for each name; keys/allow/ holds the pubs of `allowed`.
void MakeKeys(const fs::path& dir, const std::vector<std::string>& names, const std::vector<std::string>& allowed);

std::string HttpGet(const std::string& url);  // "" on failure

struct FakeAgentOptions {
  std::string region;
  std::string endpoint;
  fs::path key_file;
  std::string server_public_key;
  std::chrono::milliseconds round_time{50};
  std::chrono::milliseconds heartbeat{100};
  // false: assignments are received but never answered (an agent that dies
  // while it launches the job's workers).
  bool answer_assignments = true;
};

// A region agent in a thread: registers, heartbeats, answers assignments with
// JobReady, rounds with a RoundReport whose hash is a pure function of the
// round's inputs (so every honest replica agrees), re-registers when the
// orchestrator forgets it. `Silence()` makes it stop answering (a dead region).
class FakeAgent {
 public:
  explicit FakeAgent(FakeAgentOptions o);
  ~FakeAgent();
  void Silence() { silent_ = true; }
  void SetBadHash(bool bad) { bad_hash_ = bad; }
  // Sends these link measurements in a LinkReport once registered.
  void ReportLinks(std::vector<v1::LinkSample> links);
  bool registered() const { return registered_; }
  int assignments_received() const { return assignments_; }
  const std::string& region() const { return o_.region; }
  // Rounds this agent saw committed, in order (a round twice = applied twice).
  std::vector<uint32_t> committed() const;
  std::set<std::string> stopped_jobs() const;
  Status last_error() const;

 private:
  void Loop();
  void Handle(const v1::ControlMessage& m);

  FakeAgentOptions o_;
  std::unique_ptr<orchestrator::ControlClient> client_;
  std::atomic<bool> stop_{false}, silent_{false}, bad_hash_{false}, registered_{false};
  std::atomic<int> assignments_{0};
  const std::string session_;  // RegisterRegion.session_id: one per FakeAgent, as per agent process
  mutable std::mutex mu_;
  std::vector<uint32_t> committed_;
  std::set<std::string> running_, stopped_;
  Status last_error_;
  struct Pending {
    v1::RoundCommand cmd;
    std::chrono::steady_clock::time_point due;
  };
  std::vector<Pending> pending_;
  std::vector<v1::LinkSample> links_to_report_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace longhaul::testing
