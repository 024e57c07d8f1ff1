#include "longhaul/session/session.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <thread>
#include <utility>

#include "agent_channel.h"
#include "agent_store.h"
#include "longhaul/common/checksum.h"
#include "longhaul/common/log_line.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/proto/wire_links.h"
#include "longhaul/proto/wire_timeouts.h"
#include "longhaul/sync_policies/in_process_link.h"
#include "longhaul/session/checkpoint_path.h"
#include "longhaul/session/local_address.h"
#include "longhaul/trainer/nccl_group.h"
#include "longhaul/worker/flat_inner_state.h"

namespace longhaul::session {
namespace {

using SteadyClock = std::chrono::steady_clock;

// One wait on the agent's channel; the waits as a whole are bounded by the
// job's timeouts (AwaitStart: job idle; the verdict: the round).
Deadline Later() { return DeadlineAfter(std::chrono::hours(1)); }

// The region's NCCL group (the id through the launch's store), each worker on
// the device the agreement gave it (one per worker of a machine).
Result<std::unique_ptr<trainer::IntraRegionGroup>> MakeDeviceGroup(trainer::RendezvousStore& store,
                                                                  const std::string& job_id,
                                                                  const SessionOptions& options, int workers,
                                                                  int device) {
#ifdef LONGHAUL_HAVE_CUDA
  LONGHAUL_ASSIGN_OR_RETURN(
      std::vector<uint8_t> id,
      trainer::ShareNcclUniqueId(store, job_id, options.rank, options.collective_timeout));
  auto group = trainer::MakeNcclGroup({std::move(id), options.rank, workers, device, options.collective_timeout});
  if (!group.ok()) return group.status().WithContext("intra-region nccl group on cuda device " + std::to_string(device));
  return std::move(*group);
#else
  (void)store, (void)job_id, (void)options, (void)workers, (void)device;
  return Internal("intra-region group: nccl chosen, but this worker was built without NCCL");
#endif
}

Status CheckRank(const SessionOptions& options, const worker::JobConfig& config) {
  if (static_cast<uint32_t>(options.rank) < config.workers) return Status::Ok();
  return InvalidArgument("rank " + std::to_string(options.rank) + " is outside the job's " +
                         std::to_string(config.workers) + " workers per region");
}

}  // namespace

const char* StepEventName(StepEvent e) {
  switch (e) {
    case StepEvent::kNone: return "none";
    case StepEvent::kCommitted: return "committed";
    case StepEvent::kRolledBack: return "rolled_back";
    case StepEvent::kResynced: return "resynced";
    case StepEvent::kFinished: return "finished";
  }
  return "unknown";
}

Session::Session(SessionOptions options) : options_(std::move(options)) {}

Session::~Session() {
  replica_.reset();     // first: it waits for an exchange in flight, which uses the round's link
  channel_.reset();     // flushes the last message
  round_link_.reset();  // before the WAN port it belongs to
  previous_round_link_.reset();
}

Result<std::unique_ptr<Session>> Session::Open(const SessionOptions& options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  Collaborators c;
  c.connect = [&options](AgentLink::Watcher watcher) -> Result<std::unique_ptr<AgentLink>> {
    LONGHAUL_ASSIGN_OR_RETURN(auto channel,
                              AgentChannel::Connect(options.agent_endpoint, options.agent_public_key,
                                                    options.region + "/" + std::to_string(options.rank), watcher));
    return std::unique_ptr<AgentLink>(std::move(channel));
  };
  v1::JobAssignment assignment;
  Status status = [&]() -> Status {
    // The assignment, the WAN key and the group's rendezvous all come from the
    // agent's store for this launch: no shared folder, any host.
    LONGHAUL_ASSIGN_OR_RETURN(LaunchFromAgent launch, FetchLaunch(options));
    assignment = std::move(launch.assignment);
    LONGHAUL_ASSIGN_OR_RETURN(auto config, worker::ParseJobAssignment(assignment));
    LONGHAUL_RETURN_IF_ERROR(CheckRank(options, config));  // before a group is formed with it
    LONGHAUL_ASSIGN_OR_RETURN(const std::string host, WorkerHost(options.wan_host, options.agent_endpoint));
    // The region's workers agree on their backend through the launch's store.
    // NCCL's collectives take device memory: auto resolves to Gloo (naming
    // why) and nccl is refused unless every worker's program keeps its
    // parameters on a GPU.
    auto choice = trainer::AgreeIntraRegionBackend(*launch.store, config.job_id, options.rank,
                                                   static_cast<int>(config.workers), config.intra_region,
                                                   trainer::LocalWorkerFacts(options.parameters_on_device),
                                                   options.collective_timeout);
    if (!choice.ok()) return choice.status().WithContext("intra-region group");
    LogLine() << "worker " << options.rank << " of region " << options.region << ": intra-region collectives over "
              << (choice->backend == trainer::IntraRegionBackend::kNccl ? "nccl" : "gloo") << " (" << choice->reason
              << ")";
    if (choice->backend == trainer::IntraRegionBackend::kNccl) {
      c.device = choice->device;
      LONGHAUL_ASSIGN_OR_RETURN(c.device_group, MakeDeviceGroup(*launch.store, config.job_id, options,
                                                                static_cast<int>(config.workers), c.device));
    }
    c.intra_region = std::move(*choice);
    trainer::GlooGroupOptions gloo;
    gloo.host = host;  // the group's pairs connect host to host
    gloo.store = std::move(launch.store);
    gloo.prefix = config.job_id;  // the store is fresh per launch, so the job id is unique enough
    gloo.rank = options.rank;
    gloo.size = static_cast<int>(config.workers);
    gloo.timeout = options.collective_timeout;
    auto group = trainer::MakeGlooGroup(gloo);
    if (!group.ok()) return group.status().WithContext("intra-region group");
    c.group = std::move(*group);
    worker::WanPortOptions wopts;
    wopts.job_id = config.job_id;
    wopts.host = host;
    wopts.insecure = options.insecure;
    wopts.keys = launch.wan_keys;
    wopts.collective = options.collective_timeout;
    wopts.link_io = options.link_io;
    auto wan = worker::BindWanPort(wopts);
    if (!wan.ok()) return wan.status().WithContext("WAN port");
    c.wan = std::move(*wan);
    return Status::Ok();
  }();
  if (!status.ok()) {
    // Still tell the agent (it reports the job) before giving up.
    std::unique_ptr<Session> s(new Session(options));
    s->assignment_ = std::move(assignment);
    s->assignment_.set_job_id(options.job_id);  // the hello names the job even when the assignment never came
    auto link = c.connect([](const v1::ControlMessage&) {});
    if (!link.ok()) return link.status();
    s->channel_ = std::move(*link);
    s->ReportStartFailure(status);
    return status;
  }
  return Create(options, std::move(assignment), std::move(c));
}

Result<std::unique_ptr<Session>> Session::Create(const SessionOptions& options, v1::JobAssignment assignment,
                                                 Collaborators c) {
  std::unique_ptr<Session> s(new Session(options));
  s->assignment_ = std::move(assignment);
  Status status = [&]() -> Status {
    LONGHAUL_ASSIGN_OR_RETURN(s->config_, worker::ParseJobAssignment(s->assignment_));
    LONGHAUL_RETURN_IF_ERROR(CheckRank(options, s->config_));
    if (c.group == nullptr || c.wan == nullptr || !c.connect)
      return InvalidArgument("a session needs its intra-region group, WAN port and agent link");
    s->group_ = std::move(c.group);
    s->device_group_ = std::move(c.device_group);
    s->device_ = c.device;
    s->intra_region_ = std::move(c.intra_region);
    s->wan_ = std::move(c.wan);
    return Status::Ok();
  }();
  if (!c.connect) return status;
  // Connected last: the watcher may cancel the WAN exchange from its thread.
  auto link = c.connect([p = s.get()](const v1::ControlMessage& m) { p->Watch(m); });
  if (!link.ok()) return link.status();
  s->channel_ = std::move(*link);
  if (!status.ok()) {
    s->ReportStartFailure(status);
    return status;
  }
  return s;
}

void Session::Watch(const v1::ControlMessage& msg) {
  if (!msg.has_round_command() || msg.round_command().job_id() != config_.job_id) return;
  const auto& c = msg.round_command();
  const uint64_t epoch = current_epoch_.load();
  const bool ends_round = (c.kind() == v1::RoundCommand::ABORT && epoch != 0 && c.epoch() >= epoch) ||
                          c.kind() == v1::RoundCommand::STOP;
  if (!ends_round || round_cancelled_.exchange(true)) return;
  LogLine() << "round epoch " << epoch << ": cancelling its WAN exchange ("
            << (c.kind() == v1::RoundCommand::STOP ? std::string("STOP") : "ABORT: " + c.reason()) << ")";
  if (wan_) wan_->CancelThrough(epoch);
}

void Session::SayHello(const Status& status, uint32_t restored_round, double loss_floor) {
  v1::ControlMessage msg;
  auto* hello = msg.mutable_worker_hello();
  hello->set_job_id(assignment_.job_id());
  hello->set_worker_rank(static_cast<uint32_t>(options_.rank));
  hello->set_token(options_.worker_token);
  if (!status.ok()) {
    *hello->mutable_error() = proto::ToWireError(status);
  } else {
    hello->set_wan_endpoint(wan_->endpoint());
    hello->set_num_params(params_.size());
    hello->set_restored_round(restored_round);
    hello->set_loss_floor(loss_floor);
    hello->set_intra_region(worker::IntraRegionToWire(intra_region_.backend));
    hello->set_intra_region_reason(intra_region_.reason);
    hello->set_param_hash(ParameterHash(replica_->theta()));
  }
  channel_->Send(std::move(msg));
}

void Session::ReportStartFailure(const Status& status) {
  LogLine() << "worker " << options_.rank << " of region " << options_.region << " cannot start: " << status.ToString();
  if (channel_) SayHello(status, 0, 0);
}

Status Session::Start(std::span<float> params, StartOptions options) {
  if (started_) return FailedPrecondition("Start called twice");
  params_ = params;
  start_ = std::move(options);
  uint32_t restored = 0;
  Status status = [&]() -> Status {
    // The orchestrator's timeouts bound every wait of this worker (an older
    // orchestrator sends none: the defaults, with the agent's collective and
    // link I/O timeouts).
    if (assignment_.has_timeouts()) {
      LONGHAUL_ASSIGN_OR_RETURN(timeouts_, proto::TimeoutsFromWire(assignment_.timeouts(), "the assignment's timeouts"));
    } else {
      timeouts_.collective = options_.collective_timeout;
      timeouts_.link_io = options_.link_io;
    }
    worker::ReplicaOptions r;
    r.region = options_.region;
    r.schedule = config_.schedule;
    r.outer = config_.outer;
    r.compression = config_.compression;
    r.collective_timeout = options_.collective_timeout;
    r.tensors = start_.tensors;
    r.buffers = start_.buffers;
    r.moment_sync = config_.moment_sync;
    worker::InnerState* inner = start_.inner;
    if (!start_.optimizer_state.empty()) {
      if (inner != nullptr) return InvalidArgument("give the inner optimizer's state as InnerState or as buffers, not both");
      LONGHAUL_ASSIGN_OR_RETURN(owned_inner_,
                                worker::FlatInnerState::Create(start_.optimizer_state, params_.size(), start_.mirror));
      inner = owned_inner_.get();
    }
    LONGHAUL_ASSIGN_OR_RETURN(replica_, worker::RegionReplica::Create(r, params_, *group_, inner, start_.mirror));
    if (!assignment_.checkpoint_path().empty()) {
      auto round = replica_->RestoreCheckpoint(assignment_.checkpoint_path());
      if (!round.ok()) return round.status().WithContext("restoring checkpoint");
      restored = *round;
      // The orchestrator restores a job from the checkpoint of its last
      // committed round: the file must hold that round and the parameters the
      // orchestrator committed for it (else it is refused, and another
      // region's checkpoint is tried).
      const std::string& path = assignment_.checkpoint_path();
      if (assignment_.checkpoint_round() != 0 && restored != assignment_.checkpoint_round())
        return FailedPrecondition("checkpoint " + path + " holds round " + std::to_string(restored) +
                                  ", the job's last committed round is " +
                                  std::to_string(assignment_.checkpoint_round()));
      const std::string& want = assignment_.checkpoint_param_hash();
      if (!want.empty() && ParameterHash(replica_->theta()) != want)
        return DataLoss("checkpoint " + path + ": its parameters hash to " + ParameterHash(replica_->theta()) +
                        ", round " + std::to_string(restored) + " committed " + want.substr(0, 40));
    } else {
      // The region's workers begin from worker 0's parameters, so worker 0's
      // hash in the hello stands for the region (a launch joining a running
      // job, whose kind has no cross-region link to bootstrap it, included).
      LONGHAUL_RETURN_IF_ERROR(replica_->StartFromWorkerZero());
    }
    return Status::Ok();
  }();
  if (!status.ok()) {
    ReportStartFailure(status);
    return status;
  }
  SayHello(Status::Ok(), restored, start_.loss_floor);
  started_ = true;
  LONGHAUL_ASSIGN_OR_RETURN(resynced_at_start_, AwaitStart());
  return Status::Ok();
}

uint32_t Session::committed_round() const { return replica_ ? replica_->committed_round() : 0; }

uint64_t Session::job_step() const {
  if (!replica_) return 0;
  if (replica_->in_round()) return round_first_step_ + replica_->step_in_round();
  // Between rounds (or finished): round_ is done, its steps with it.
  return round_ == 0 ? 0 : round_first_step_ + replica_->inner_steps();
}

std::span<const float> Session::theta() const {
  return replica_ ? replica_->theta() : std::span<const float>();
}

Status Session::BeginRound(const v1::RoundCommand& cmd, bool* joined) {
  // The last round's links again: a link's rate is measured when its busy
  // period ends, at the ack of our last send, which can come after our report.
  if (options_.rank == 0) ReportLinks(cmd);
  current_ = cmd;
  round_ = cmd.round();
  current_epoch_ = cmd.epoch();
  round_cancelled_ = false;
  worker::RoundInputs in;
  in.round = cmd.round();
  in.epoch = cmd.epoch();
  const uint64_t h = config_.schedule.inner_steps;
  round_first_step_ = uint64_t{cmd.round() > 0 ? cmd.round() - 1 : 0} * h;
  if (cmd.has_plan() && cmd.plan().inner_steps() != 0) {
    const auto& plan = cmd.plan();
    auto codec = proto::CodecFromWire(plan.codec());
    if (!codec.ok()) return codec.status().WithContext("round plan");
    in.inner_steps = plan.inner_steps();
    in.codec = *codec;
    in.overlap_steps = plan.overlap_steps();
    in.compute_budget_seconds = plan.compute_budget_seconds();
    in.max_inner_steps = plan.max_inner_steps();
    in.first_step = round_first_step_ = plan.first_step();
  }
  int my_rank = -1;
  std::vector<worker::WanPeer> peers;
  for (int k = 0; k < cmd.participants_size(); ++k) {
    const auto& p = cmd.participants(k);
    if (p.region() == options_.region) my_rank = k;
    if (p.shard_endpoints_size() != static_cast<int>(config_.workers)) {
      return InvalidArgument("participant " + p.region() + " lists " + std::to_string(p.shard_endpoints_size()) +
                             " shard endpoints; the job has " + std::to_string(config_.workers) + " workers per region");
    }
    peers.push_back({p.region(), p.shard_endpoints(options_.rank), p.public_key()});
    if (p.region() == cmd.bootstrap_region()) in.bootstrap_rank = k;
  }
  if (my_rank < 0) return InvalidArgument("region " + options_.region + " is not among the round's participants");
  for (const auto& j : cmd.joining_regions()) {
    in.any_joining = true;
    if (j == options_.region) in.this_region_joining = true;
  }
  if (in.any_joining && in.bootstrap_rank < 0) {
    return InvalidArgument("joining regions listed but bootstrap region '" + cmd.bootstrap_region() +
                           "' is not a participant");
  }
  const bool needs_link = config_.schedule.traits().needs_link;
  std::unique_ptr<sync_policies::CollectiveLink> link;
  if (needs_link && peers.size() > 1) {
    // The scheduler sized the parallel connections from the measured link.
    // No call on the round's link waits past two round timeouts: it serves
    // this round and, with Streaming DiLoCo's overlap, the start of the next
    // (each round bounded by the round timeout).
    auto group = wan_->Join(peers, my_rank, cmd.round(), cmd.epoch(), static_cast<int>(cmd.connections_per_link()),
                            DeadlineAfter(timeouts_.round * 2));
    if (!group.ok()) return group.status().WithContext("joining the round's WAN group");
    link = std::move(*group);
  }
  // The link outlives the round: our last sends may still be in flight when our
  // collective returns, and peers still need them. It is replaced here.
  previous_round_link_ = std::move(round_link_);
  round_link_ = std::move(link);
  sync_policies::CollectiveLink* l = round_link_.get();
  if (l == nullptr && needs_link) {
    // A single participant still runs the machinery: a one-member group.
    if (!solo_) solo_ = std::make_unique<sync_policies::InProcessGroup>(1);
    l = &solo_->link(0);
  }
  LONGHAUL_RETURN_IF_ERROR(replica_->BeginRound(in, l));
  *joined = in.this_region_joining;
  return Status::Ok();
}

Result<bool> Session::AwaitStart() {
  // The orchestrator fails a job with no committed round for job_idle: a
  // worker that waited that long for its next START was forgotten.
  const Deadline give_up = DeadlineAfter(timeouts_.job_idle);
  for (;;) {
    auto msg = channel_->Next(std::min(give_up, Later()));
    if (!msg && std::chrono::steady_clock::now() >= give_up)
      return DeadlineExceeded("no START or STOP from the agent within the job idle timeout (" +
                              std::to_string(timeouts_.job_idle.count() / 1000) + " s)");
    if (!msg || !msg->has_round_command() || msg->round_command().job_id() != config_.job_id) continue;
    const auto& cmd = msg->round_command();
    if (cmd.kind() == v1::RoundCommand::STOP) {
      finished_ = true;
      return false;
    }
    if (cmd.kind() != v1::RoundCommand::START) continue;
    bool joined = false;
    Status s = BeginRound(cmd, &joined);
    if (s.ok()) {
      last_step_ = SteadyClock::now();
      return joined;
    }
    LogLine() << "round " << cmd.round() << " epoch " << cmd.epoch() << " cannot start: " << s.ToString();
    SendReport(cmd, s, "");
  }
}

void Session::SendReport(const v1::RoundCommand& cmd, const Result<worker::RoundResult>& result,
                         const std::string& checkpoint_path) {
  v1::ControlMessage msg;
  auto* report = msg.mutable_round_report();
  report->set_job_id(config_.job_id);
  report->set_round(cmd.round());
  report->set_epoch(cmd.epoch());
  report->set_region(options_.region);
  if (!result.ok()) {
    LogLine() << "round " << cmd.round() << " epoch " << cmd.epoch() << " failed: " << result.status().ToString();
    report->set_ok(false);
    *report->mutable_error() = proto::ToWireError(result.status());
    report->mutable_error()->set_worker_output(std::exchange(failure_output_, std::string()));
    channel_->Send(std::move(msg));
    return;
  }
  const auto& r = *result;
  report->set_ok(true);
  report->set_param_hash(r.param_hash);
  report->set_loss(r.loss);
  report->set_val_loss(r.val_loss);
  report->set_tokens(r.tokens);
  report->set_wan_bytes_sent(r.wan_bytes_sent);
  report->set_compute_seconds(r.compute_seconds);
  report->set_comm_seconds(r.comm_seconds);
  report->set_wall_seconds(r.wall_seconds);
  report->set_inner_steps(r.inner_steps);
  if (!checkpoint_path.empty()) report->set_checkpoint_path(checkpoint_path);
  LogLine() << "round " << cmd.round() << " epoch " << cmd.epoch() << ": hash " << r.param_hash << " loss " << r.loss
            << " val " << r.val_loss;
  channel_->Send(std::move(msg));
}

void Session::ReportLinks(const v1::RoundCommand& cmd) {
  const auto measured = wan_->measurements();
  v1::ControlMessage msg;
  auto* report = msg.mutable_link_report();
  report->set_region(options_.region);
  for (const auto& p : cmd.participants()) {
    if (p.region() == options_.region || p.shard_endpoints_size() <= options_.rank) continue;
    auto it = measured.find(p.shard_endpoints(options_.rank));
    if (it == measured.end() || (!it->second.has_rate() && !it->second.has_rtt())) continue;
    *report->add_links() = proto::LinkToWire(p.region(), it->second);
  }
  if (report->links_size() > 0) channel_->Send(std::move(msg));
}

Result<std::string> Session::MaybeCheckpoint(const v1::RoundCommand& cmd, const worker::RoundResult& result) {
  if (!cmd.checkpoint() || cmd.checkpoint_dir().empty()) return std::string();
  // Written before the verdict (the report carries its path); deleted if the
  // round does not commit, so only committed rounds leave files behind.
  const auto path = CheckpointPath(cmd.checkpoint_dir(), config_.job_id, options_.region, cmd.round());
  LONGHAUL_RETURN_IF_ERROR(replica_
                               ->WriteCheckpoint(path, {{"job_id", config_.job_id},
                                                        {"round", std::to_string(cmd.round())},
                                                        {"epoch", std::to_string(cmd.epoch())},
                                                        {"region", options_.region},
                                                        {"param_hash", result.param_hash}})
                               .WithContext("checkpoint"));
  return options_.rank == 0 ? path.string() : std::string();
}

Result<StepEvent> Session::AfterAbort(const std::string& why) {
  if (replica_->in_round()) {
    LogLine() << "round " << round_ << ": rolled back (" << why << ")";
    replica_->AbandonRound();
  }
  replica_->Rollback();
  LONGHAUL_ASSIGN_OR_RETURN(bool joined, AwaitStart());
  if (finished_) return StepEvent::kFinished;
  return joined ? StepEvent::kResynced : StepEvent::kRolledBack;
}

Status Session::SyncGradients(std::span<float> grad) {
  if (finished_ || !started_ || !replica_->in_round() || !step_failure_.ok()) return step_failure_;
  if (round_cancelled_.load(std::memory_order_relaxed)) return Status::Ok();  // Step() rolls back
  Status s = replica_->AllReduceGradients(grad);
  if (!s.ok()) {
    LogLine() << "round " << round_ << ": " << s.ToString();
    step_failure_ = s;
  }
  return s;
}

Result<StepEvent> Session::Step(float loss, uint64_t tokens) {
  if (finished_) return StepEvent::kFinished;
  if (!started_) return FailedPrecondition("Step() before Start()");
  auto now = SteadyClock::now();
  if (options_.compute_throttle_percent > 100) {  // a slower region, for benchmarks and tests
    std::this_thread::sleep_for((now - last_step_) * (options_.compute_throttle_percent - 100) / 100);
    now = SteadyClock::now();
  }
  const double compute = std::chrono::duration<double>(now - last_step_).count();
  if (round_cancelled_.load(std::memory_order_relaxed)) {
    step_failure_ = Status::Ok();
    return AfterAbort("the orchestrator ended the round");
  }
  if (owned_inner_ != nullptr && step_failure_.ok()) step_failure_ = owned_inner_->TakeFailure();
  if (!step_failure_.ok()) {  // SyncGradients (or a copy of the optimizer state) failed this step
    const Status failed = std::exchange(step_failure_, Status::Ok());
    SendReport(*current_, failed, "");
    return AfterAbort(failed.message());
  }
  auto last = replica_->AfterInnerStep(loss, tokens, compute);
  if (!last.ok()) {  // the replica has rolled the round back
    SendReport(*current_, last.status(), "");
    return AfterAbort(last.status().message());
  }
  StepEvent event = StepEvent::kNone;
  if (*last) {
    LONGHAUL_ASSIGN_OR_RETURN(event, FinishRound());
  }
  last_step_ = SteadyClock::now();
  return event;
}

Status Session::UserCodeFailed(const std::string& what, std::string user_text) {
  failure_output_ = std::move(user_text);
  return Aborted(what + " (its message is in the job's worker output)");
}

Result<StepEvent> Session::FailRound(const Status& why) {
  if (finished_) return StepEvent::kFinished;
  if (!started_ || !current_) return FailedPrecondition("FailRound() outside a round");
  step_failure_ = Status::Ok();
  SendReport(*current_, why, "");
  return AfterAbort(why.message());
}

Result<StepEvent> Session::FinishRound() {
  const v1::RoundCommand cmd = *current_;
  auto result = replica_->EndRound(options_.rank == 0 ? start_.validation : worker::ValidationFn{});
  if (!result.ok()) {
    SendReport(cmd, result.status(), "");
    return AfterAbort(result.status().message());
  }
  auto checkpoint = MaybeCheckpoint(cmd, *result);
  if (!checkpoint.ok()) {
    SendReport(cmd, checkpoint.status(), "");
    return AfterAbort(checkpoint.status().message());
  }
  // Before the report, so the round's links reach the orchestrator before it
  // plans the next round; a link whose last acks are still on their way is
  // reported again when the next round begins.
  if (options_.rank == 0) ReportLinks(cmd);
  SendReport(cmd, *result, *checkpoint);
  auto drop_checkpoint = [&] {
    if (checkpoint->empty()) return;
    std::error_code ec;
    std::filesystem::remove(*checkpoint, ec);
  };
  // The orchestrator decides every round within its round timeout (a verdict,
  // an ABORT or a new START); a worker that heard none by then rolls back.
  const Deadline verdict_by = DeadlineAfter(timeouts_.round);
  for (;;) {
    auto msg = channel_->Next(std::min(verdict_by, Later()));
    if (!msg && std::chrono::steady_clock::now() >= verdict_by) {
      drop_checkpoint();
      return AfterAbort("no verdict within the round timeout (" + std::to_string(timeouts_.round.count() / 1000) +
                        " s)");
    }
    if (!msg) continue;
    if (msg->has_round_verdict()) {
      const auto& v = msg->round_verdict();
      if (v.job_id() != config_.job_id || v.round() != cmd.round() || v.epoch() != cmd.epoch()) continue;  // stale
      if (!v.committed()) {
        drop_checkpoint();
        return AfterAbort("verdict: " + v.reason());
      }
      replica_->Commit();
      if (cmd.round() >= config_.rounds) {
        finished_ = true;  // the job's last round: nothing more will start; params hold theta(T)
        return StepEvent::kFinished;
      }
      LONGHAUL_ASSIGN_OR_RETURN(bool joined, AwaitStart());
      if (finished_) return StepEvent::kFinished;
      return joined ? StepEvent::kResynced : StepEvent::kCommitted;
    }
    if (!msg->has_round_command() || msg->round_command().job_id() != config_.job_id) continue;
    const auto& c = msg->round_command();
    if (c.kind() == v1::RoundCommand::STOP) {
      drop_checkpoint();
      replica_->Rollback();
      finished_ = true;
      return StepEvent::kFinished;
    }
    if (c.kind() == v1::RoundCommand::ABORT && c.epoch() >= cmd.epoch()) {
      drop_checkpoint();
      return AfterAbort("ABORT: " + c.reason());
    }
    if (c.kind() == v1::RoundCommand::START) {  // a new START without a verdict: ours did not commit
      drop_checkpoint();
      replica_->Rollback();
      bool joined = false;
      Status s = BeginRound(c, &joined);
      if (!s.ok()) {
        SendReport(c, s, "");
        LONGHAUL_ASSIGN_OR_RETURN(joined, AwaitStart());
        if (finished_) return StepEvent::kFinished;
      }
      last_step_ = SteadyClock::now();
      return joined ? StepEvent::kResynced : StepEvent::kRolledBack;
    }
  }
}

}  // namespace longhaul::session
