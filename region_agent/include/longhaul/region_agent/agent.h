// Agent: the per-region daemon behind `longhaul-agent`.
//
// Threads: the OrchestratorSession thread registers and heartbeats; the thread
// calling Run() is the job controller. The controller admits assignments
// (JobConfig checks), launches `longhaul-worker` processes (RegionJob), is
// their rendezvous (a ROUTER socket for control and, per launch, the key/value
// store their intra-region group meets through: LaunchStore), forwards round
// commands and verdicts to them, aggregates their reports into the region's
// RoundReport, and supervises them: a worker that dies makes the heartbeat
// unhealthy (naming worker and exit status), fails the round in flight, stops
// the job's other workers, and leaves the agent ready for new assignments.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "longhaul/common/status.h"
#include "longhaul/monitoring/metrics_server.h"
#include "longhaul/region_agent/agent_metrics.h"
#include "longhaul/region_agent/agent_options.h"
#include "longhaul/region_agent/health_board.h"
#include "longhaul/region_agent/orchestrator_session.h"
#include "longhaul/region_agent/region_job.h"

namespace longhaul::region_agent {

class DropLog;

class Agent {
 public:
  // Validates options, loads keys, binds the worker socket and /metrics.
  static Result<std::unique_ptr<Agent>> Create(AgentOptions options);
  ~Agent();

  // Runs until `stop` turns true; then stops every worker and link emulator.
  Status Run(const std::atomic<bool>& stop);

  int metrics_port() const { return metrics_->port(); }
  std::string metrics_url() const { return metrics_->url(); }
  const std::string& worker_endpoint() const { return worker_endpoint_; }

 private:
  explicit Agent(AgentOptions options);

  // Orchestrator -> agent.
  void HandleOrchestratorFrame(const zmq::message_t& frame);
  void OnAssignment(const v1::JobAssignment& a);
  void OnRoundCommand(const v1::RoundCommand& cmd);
  void OnVerdict(const v1::RoundVerdict& verdict);
  // Worker -> agent.
  // One frame to one worker connection (dropped with a log line when it is gone).
  void SendToWorker(const std::string& routing_id, const std::string& frame, const std::string& job_id);
  void OnStoreRequest(const std::string& routing_id, uint64_t request_id, const v1::StoreRequest& request);
  void HandleWorkerFrame(const std::string& routing_id, const zmq::message_t& frame);
  void OnHello(const std::string& routing_id, const v1::WorkerHello& hello);
  // Supervision tick: crashes, start-up deadlines, finished stops.
  void Supervise();
  void FailJob(RegionJob& job, const RegionJob::Failure& failure, bool crash);

  void SendToOrchestrator(v1::ControlMessage msg);
  // JobReady for a launch whose workers all said hello (its endpoint is set).
  void SendJobReady(const RegionJob& job);
  void SendToWorkers(RegionJob& job, const v1::ControlMessage& msg);
  void Reject(const std::string& job_id, const Status& status, const std::string& worker_output = "");
  void PublishState();

  AgentOptions options_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> workers_socket_;   // ROUTER on 127.0.0.1:0
  std::unique_ptr<zmq::socket_t> session_pair_;     // PAIR to the session thread
  std::string worker_endpoint_;
  std::filesystem::path worker_binary_;
  std::filesystem::path linkem_binary_;
  std::filesystem::path task_binary_;
  std::string worker_public_key_;  // the worker socket's CURVE key ("" when --insecure)
  std::filesystem::path python_path_;     // <build>/python when present (command workers' PYTHONPATH)
  HealthBoard health_;
  std::unique_ptr<OrchestratorSession> session_;
  std::unique_ptr<monitoring::MetricsServer> metrics_;
  std::unique_ptr<AgentMetrics> agent_metrics_;
  std::map<std::string, std::unique_ptr<RegionJob>> jobs_;
  std::map<std::string, std::string> failed_jobs_;  // job -> why it stopped here
  std::map<std::string, std::pair<std::string, int>> routes_;  // routing id -> (job, rank)
  std::unique_ptr<DropLog> drops_;
  uint64_t launches_ = 0;
  std::optional<CgroupRoot> cgroups_;  // where launches' cgroups go (when limits are set)
  uint64_t request_id_ = 0;
};

}  // namespace longhaul::region_agent
