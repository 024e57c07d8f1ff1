// Session: the worker library. One Session per worker process, whoever trains:
// the built-in trainer (longhaul-worker), a PyTorch script (longhaul.torch) or
// any program through the C ABI (longhaul/session/c_api.h). There is one
// worker-side path; none of its clients re-implements the round.
//
//   auto s = Session::Open(*SessionOptionsFromEnvironment());   // job, WAN port, group
//   s->Start(params, {...});          // hello; restore a checkpoint; wait for round 1
//   while (!s->finished()) {
//     ... forward and backward: grad ...
//     s->SyncGradients(grad);         // kind sync: the mean over regions; else a no-op
//     ... the optimizer step on params ...
//     s->Step(loss, tokens);          // no-op except at the schedule's sync points
//   }
//
// `params` is the caller's flat fp32 buffer (the local parameters): the session
// reads and writes it in place, never copies it per step. At a round's end Step()
// runs the outer step (pseudo-gradient, guard, codec with error feedback,
// cross-region ring over the WAN, outer optimizer), reports the parameter hash
// and waits for the orchestrator's verdict: on commit params hold theta(t); on
// abort params (and the InnerState) are back at theta(t-1) and the same round
// runs again with the next H steps. An ABORT or STOP that arrives mid-round ends
// the round at the next Step(). The job spec is the one source of truth for H,
// codec, fragments, overlap and the outer optimizer: config() exposes it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/worker/flat_inner_state.h"
#include "longhaul/worker/job_config.h"
#include "longhaul/worker/region_replica.h"
#include "longhaul/worker/wan_port.h"
#include "longhaul/session/agent_link.h"
#include "longhaul/session/session_options.h"
#include "longhaul/sync_policies/in_process_link.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/trainer/intra_region_backend.h"

namespace longhaul::session {

enum class StepEvent {
  kNone,        // an inner step like any other
  kCommitted,   // the round committed: params hold theta(t)
  kRolledBack,  // the round aborted: params hold theta(t-1); the round is retried
  kResynced,    // this region was re-synchronised from a live one (after a rejoin)
  kFinished,    // the job is over: its last round committed (params hold the final
                // theta) or it was stopped (params at the last committed round).
                // The caller's code after its loop runs: the agent waits
                // worker.exit_grace_s for the worker to exit before SIGTERM.
};
const char* StepEventName(StepEvent e);  // "none", "committed", ...

struct StartOptions {
  std::vector<trainer::TensorView> tensors;        // names of params (checkpoints); empty: one "flat"
  size_t buffers = 0;  // params' last floats that are model buffers (RegionReplica: averaged, no outer step)
  worker::InnerState* inner = nullptr;       // optional, must outlive the session
  // Or the inner optimizer's state as caller-owned buffers of params' length
  // (AdamW's moments): saved and restored with every round, and shared with a
  // region joining a sync job (worker::FlatInnerState). Not with `inner`.
  std::vector<std::span<float>> optimizer_state;
  // Parameters kept on a GPU: `params` is their host copy, brought up to date
  // only around the outer step (worker::ParameterMirror), and so are the
  // optimizer_state buffers (its StateToHost/StateToDevice). Optional; must
  // outlive the session.
  worker::ParameterMirror* mirror = nullptr;
  worker::ValidationFn validation;           // run on rank 0 after the outer step
  double loss_floor = 0;                           // reported to `longhaul status` (0 = unknown)
};

class Session {
 public:
  // Reads the assignment, connects to the agent, forms the intra-region group
  // (every worker of the region must call Open) and binds the WAN listener.
  static Result<std::unique_ptr<Session>> Open(const SessionOptions& options);
  // A session over given collaborators (Open passes the real ones; tests pass
  // fakes and drive every protocol branch in-process): the region's group, the
  // WAN port, and the agent link, connected last with the session's watcher.
  struct Collaborators {
    std::unique_ptr<trainer::IntraRegionGroup> group;
    trainer::BackendChoice intra_region;  // the group's backend and why (the hello reports it)
    // Where the region agreed on NCCL: the same workers' NCCL group on
    // `device`, for collectives on device memory (the host ones stay on group).
    std::unique_ptr<trainer::IntraRegionGroup> device_group;
    int device = -1;
    std::unique_ptr<worker::WanPort> wan;
    AgentLinkFactory connect;
  };
  static Result<std::unique_ptr<Session>> Create(const SessionOptions& options, v1::JobAssignment assignment,
                                                 Collaborators collaborators);
  ~Session();

  const worker::JobConfig& config() const { return config_; }
  const SessionOptions& options() const { return options_; }
  const std::string& job_id() const { return config_.job_id; }
  // The region's workers, for the built-in trainer's gradient all-reduce.
  trainer::IntraRegionGroup& group() { return *group_; }
  // The region's NCCL group where it agreed on NCCL (its collectives take
  // memory on device()), else null.
  trainer::IntraRegionGroup* device_group() { return device_group_.get(); }
  int device() const { return device_; }

  // Attaches params, restores the assignment's checkpoint into them (if any),
  // tells the agent the worker is ready, and waits for the first round (or STOP).
  Status Start(std::span<float> params, StartOptions options);
  // Between backward and the optimizer step of every inner step. Kind sync
  // (synchronous data parallelism): replaces `grad` (this region's mean
  // gradient, the same in each of its workers; num_params floats) with the mean
  // over the round's regions, so every worker of every region takes the same
  // optimizer step (the model buffers' entries are zeroed). Every other kind: a no-op. A failure (returned, and logged)
  // fails the round: the caller may still take its optimizer step, and the next
  // Step() reports the failure and rolls the round back (parameters and
  // InnerState included).
  Status SyncGradients(std::span<float> grad);
  // Whether SyncGradients does anything (kind sync): clients may skip
  // gathering their gradients into one buffer otherwise.
  bool syncs_gradients() const { return config_.schedule.traits().averages_gradients; }
  // After every inner step. Blocks only at sync points and round ends.
  Result<StepEvent> Step(float loss, uint64_t tokens);
  // The inner step itself failed (e.g. the intra-region all-reduce): the
  // round is reported failed and rolled back; waits for the next round.
  Result<StepEvent> FailRound(const Status& why);
  // A failure in the worker's own code (an exception, the reason a script
  // gave fail_round): the next failed report says `what` happened and carries
  // `user_text` as Error.worker_output, which only the job's owner sees,
  // never in a reason. Returns the status to fail with.
  Status UserCodeFailed(const std::string& what, std::string user_text);
  // Tells the agent start-up failed (before or in Start): it reports the job.
  void ReportStartFailure(const Status& status);

  bool finished() const { return finished_; }
  uint32_t round() const { return round_; }                // round in progress (or last)
  uint32_t committed_round() const;
  uint64_t job_step() const;                               // job-wide inner steps done
  bool resynced_at_start() const { return resynced_at_start_; }
  size_t num_params() const { return params_.size(); }
  std::span<const float> theta() const;
  worker::RegionReplica* replica() { return replica_.get(); }

 private:
  explicit Session(SessionOptions options);
  void Watch(const v1::ControlMessage& msg);  // on the channel's thread
  void SayHello(const Status& status, uint32_t restored_round, double loss_floor);
  // Waits for START (begins it: WAN group, bootstrap) or STOP. True if this
  // region was re-synchronised.
  Result<bool> AwaitStart();
  Status BeginRound(const v1::RoundCommand& cmd, bool* joined);
  // The round's last step: report, verdict, the next START.
  Result<StepEvent> FinishRound();
  Result<StepEvent> AfterAbort(const std::string& why);
  void SendReport(const v1::RoundCommand& cmd, const Result<worker::RoundResult>& result,
                  const std::string& checkpoint_path);
  void ReportLinks(const v1::RoundCommand& cmd);
  Result<std::string> MaybeCheckpoint(const v1::RoundCommand& cmd, const worker::RoundResult& result);

  SessionOptions options_;
  worker::JobConfig config_;
  v1::JobAssignment assignment_;
  Timeouts timeouts_;  // the assignment's (the orchestrator's), bounding every wait
  std::unique_ptr<trainer::IntraRegionGroup> group_;
  std::unique_ptr<trainer::IntraRegionGroup> device_group_;
  int device_ = -1;
  trainer::BackendChoice intra_region_;
  std::unique_ptr<worker::WanPort> wan_;
  std::unique_ptr<AgentLink> channel_;
  std::unique_ptr<worker::FlatInnerState> owned_inner_;  // from StartOptions::optimizer_state
  std::unique_ptr<worker::RegionReplica> replica_;
  std::unique_ptr<sync_policies::CollectiveLink> round_link_;  // outlives its round: peers may still read
  // The round before's, one round longer: leaving a group aborts its sends not
  // yet acked, and the acks of its last sends can come after the next START
  // (the control plane is faster than the WAN); aborted, their link would
  // never get a rate measured.
  std::unique_ptr<sync_policies::CollectiveLink> previous_round_link_;
  std::unique_ptr<sync_policies::InProcessGroup> solo_;       // the link of a one-region round
  std::span<float> params_;
  StartOptions start_;
  std::optional<v1::RoundCommand> current_;   // the round in progress
  uint32_t round_ = 0;
  uint64_t round_first_step_ = 0;  // job-wide inner steps before round_ (its plan's first_step)
  uint32_t rounds_done_before_ = 0;           // restored or start round - 1
  bool finished_ = false;
  bool started_ = false;
  bool resynced_at_start_ = false;
  std::chrono::steady_clock::time_point last_step_;
  // Set by the channel's thread: an ABORT (of epoch >= the current round's)
  // or STOP arrived, so the round in progress cannot commit.
  std::atomic<uint64_t> current_epoch_{0};
  std::atomic<bool> round_cancelled_{false};
  Status step_failure_;  // SyncGradients failed: the next Step() ends the round
  std::string failure_output_;  // UserCodeFailed's text, for the next failed report
};

}  // namespace longhaul::session
