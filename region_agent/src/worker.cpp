#include "longhaul/region_agent/worker.h"

#include <cinttypes>
#include <cstdio>
#include <deque>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <optional>

#include <zmq.hpp>

#include "longhaul/proto/frame.h"
#include "longhaul/region_agent/job_config.h"
#include "longhaul/region_agent/region_replica.h"
#include "longhaul/region_agent/wan_port.h"
#include "longhaul/sync_policies/in_process_link.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/trainer/trainer.h"
#include "zmq_poll.h"

namespace longhaul::region_agent {

std::filesystem::path CheckpointPath(const std::filesystem::path& dir, const std::string& job_id,
                                     const std::string& region, uint32_t round) {
  char name[64];
  std::snprintf(name, sizeof(name), "round-%08" PRIu32, round);
  return dir / (job_id + "-" + region + "-" + name + ".safetensors");
}

namespace {

class Worker {
 public:
  explicit Worker(const WorkerOptions& options) : options_(options), dealer_(ctx_, zmq::socket_type::dealer) {
    dealer_.set(zmq::sockopt::linger, 2000);  // the last report/hello must reach the agent
    dealer_.connect(options_.agent_endpoint);
  }

  Status StartUp();
  void SayHello(const Status& status);
  int Serve();

 private:
  void Send(v1::ControlMessage msg) {
    msg.set_sender(options_.region + "/" + std::to_string(options_.rank));
    const std::string frame = proto::EncodeControl(std::move(msg));
    dealer_.send(zmq::buffer(frame), zmq::send_flags::none);
  }
  // The next message from the agent within `timeout` (-1 = wait); nothing on
  // timeout or on a frame that does not decode (logged).
  std::optional<v1::ControlMessage> Receive(std::chrono::milliseconds timeout);
  void OnStart(const v1::RoundCommand& cmd);
  // RunRound on its own thread while this one keeps reading the agent.
  Result<RoundResult> RunRoundWatched(const v1::RoundCommand& cmd);
  // Worker 0 tells the agent what its WAN connections measured, by peer region,
  // for the orchestrator's bandwidth-aware scheduler.
  void ReportLinks(const v1::RoundCommand& cmd);
  Result<RoundResult> RunRound(const v1::RoundCommand& cmd);
  void OnVerdict(bool committed, uint32_t round, uint64_t epoch, const std::string& why);
  void DropPendingCheckpoint();

  WorkerOptions options_;
  zmq::context_t ctx_;
  zmq::socket_t dealer_;
  JobConfig config_;
  std::string job_id_;
  std::unique_ptr<trainer::DataSource> data_;
  std::unique_ptr<trainer::IntraRegionGroup> group_;
  std::unique_ptr<trainer::InnerTrainer> trainer_;
  std::unique_ptr<RegionReplica> replica_;
  std::unique_ptr<WanPort> wan_;
  std::unique_ptr<sync_policies::CollectiveLink> round_link_;  // must die before wan_
  uint32_t restored_round_ = 0;
  std::optional<std::pair<uint32_t, uint64_t>> pending_;  // (round, epoch) awaiting a verdict
  std::filesystem::path pending_checkpoint_;
  std::deque<v1::ControlMessage> backlog_;  // arrived while a round ran; handled after it
};

Status Worker::StartUp() {
  v1::JobAssignment assignment;
  {
    std::ifstream in(options_.assignment_file, std::ios::binary);
    if (!in) return NotFound("cannot read assignment " + options_.assignment_file.string());
    if (!assignment.ParseFromIstream(&in)) return DataLoss("assignment " + options_.assignment_file.string() + " does not parse");
  }
  job_id_ = assignment.job_id();
  auto config = ParseJobAssignment(assignment);
  if (!config.ok()) return config.status();
  config_ = *config;
  if (options_.rank < 0 || static_cast<uint32_t>(options_.rank) >= config_.workers) {
    return InvalidArgument("--rank " + std::to_string(options_.rank) + " is outside the job's " +
                           std::to_string(config_.workers) + " workers");
  }
  auto data = trainer::MakeDataSource(config_.data, config_.region_index, config_.region_count,
                                      static_cast<uint32_t>(options_.rank), config_.workers);
  if (!data.ok()) return data.status().WithContext("data");
  data_ = std::move(*data);

  trainer::GlooGroupOptions gloo;
  gloo.store_dir = options_.store_dir;
  gloo.prefix = job_id_;  // the folder is fresh per launch, so the job id is unique enough
  gloo.rank = options_.rank;
  gloo.size = static_cast<int>(config_.workers);
  gloo.timeout = options_.collective_timeout;
  auto group = trainer::MakeGlooGroup(gloo);
  if (!group.ok()) return group.status().WithContext("intra-region group");
  group_ = std::move(*group);

  trainer::TrainerOptions topts;
  topts.model = config_.model;
  topts.adamw = config_.inner;
  topts.batch_size = config_.batch_size;
  topts.seed = config_.seed;
  LONGHAUL_RETURN_IF_ERROR(topts.Validate().WithContext("trainer options"));
  trainer_ = std::make_unique<trainer::InnerTrainer>(topts, *data_, *group_);

  ReplicaOptions ropts;
  ropts.region = options_.region;
  ropts.schedule = config_.schedule;
  ropts.outer = config_.outer;
  ropts.compression = config_.compression;
  ropts.validation_batches = options_.validation_batches;
  ropts.collective_timeout = options_.collective_timeout;
  auto replica = RegionReplica::Create(ropts, *trainer_, *group_);
  if (!replica.ok()) return replica.status();
  replica_ = std::move(*replica);
  if (!assignment.checkpoint_path().empty()) {
    auto round = replica_->RestoreCheckpoint(assignment.checkpoint_path());
    if (!round.ok()) return round.status().WithContext("restoring checkpoint");
    restored_round_ = *round;
  }

  WanPortOptions wopts;
  wopts.job_id = job_id_;
  wopts.host = options_.wan_host;
  wopts.insecure = options_.insecure;
  wopts.key_file = options_.key_file;
  wopts.allowlist = options_.allowlist;
  auto wan = BindWanPort(wopts);
  if (!wan.ok()) return wan.status().WithContext("WAN port");
  wan_ = std::move(*wan);
  return Status::Ok();
}

void Worker::SayHello(const Status& status) {
  v1::ControlMessage msg;
  auto* hello = msg.mutable_worker_hello();
  hello->set_job_id(job_id_);
  hello->set_worker_rank(static_cast<uint32_t>(options_.rank));
  if (!status.ok()) {
    *hello->mutable_error() = proto::ToWireError(status);
  } else {
    hello->set_wan_endpoint(wan_->endpoint());
    hello->set_num_params(trainer_->model().num_params());
    hello->set_restored_round(restored_round_);
    hello->set_loss_floor(data_->LossFloor());
  }
  Send(std::move(msg));
}

Result<RoundResult> Worker::RunRound(const v1::RoundCommand& cmd) {
  RoundInputs in;
  in.round = cmd.round();
  in.epoch = cmd.epoch();
  int my_rank = -1;
  std::vector<WanPeer> peers;
  for (int k = 0; k < cmd.participants_size(); ++k) {
    const auto& p = cmd.participants(k);
    if (p.region() == options_.region) my_rank = k;
    if (p.shard_endpoints_size() != static_cast<int>(config_.workers)) {
      return InvalidArgument("participant " + p.region() + " lists " + std::to_string(p.shard_endpoints_size()) +
                             " shard endpoints; the job has " + std::to_string(config_.workers) + " workers per region");
    }
    peers.push_back({p.region(), p.shard_endpoints(options_.rank)});
    if (p.region() == cmd.bootstrap_region()) in.bootstrap_rank = k;
  }
  if (my_rank < 0) return InvalidArgument("region " + options_.region + " is not among the round's participants");
  for (const auto& j : cmd.joining_regions()) {
    in.any_joining = true;
    if (j == options_.region) in.this_region_joining = true;
  }
  if (in.any_joining && in.bootstrap_rank < 0) {
    return InvalidArgument("joining regions listed but bootstrap region '" + cmd.bootstrap_region() + "' is not a participant");
  }
  std::unique_ptr<sync_policies::CollectiveLink> link;
  if (config_.schedule.kind != "local" && peers.size() > 1) {
    // The scheduler sized the parallel connections from the measured link.
    auto joined = wan_->Join(peers, my_rank, cmd.round(), cmd.epoch(), static_cast<int>(cmd.connections_per_link()),
                             DeadlineAfter(options_.collective_timeout));
    if (!joined.ok()) return joined.status().WithContext("joining the round's WAN group");
    link = std::move(*joined);
  }
  // The link outlives the round: our last sends may still be in flight when our
  // collective returns, and peers still need them. It is replaced at the next START.
  round_link_ = std::move(link);
  // A single participant still runs the machinery: a one-member in-process group.
  std::unique_ptr<sync_policies::InProcessGroup> solo;
  sync_policies::CollectiveLink* l = round_link_.get();
  if (l == nullptr && config_.schedule.kind != "local") {
    solo = std::make_unique<sync_policies::InProcessGroup>(1);
    l = &solo->link(0);
  }
  return replica_->Run(in, l);
}

// An ABORT of the running round (or a STOP) cancels its WAN exchange at once:
// a worker whose peer region died stops waiting on it instead of running into
// the collective timeout, and the retry starts without delay. Whatever else
// the agent sends meanwhile (a verdict, the next START) waits in the backlog.
Result<RoundResult> Worker::RunRoundWatched(const v1::RoundCommand& cmd) {
  auto round = std::async(std::launch::async, [&] { return RunRound(cmd); });
  using namespace std::chrono_literals;
  while (round.wait_for(0ms) != std::future_status::ready) {
    auto msg = Receive(5ms);
    if (!msg) continue;
    if (msg->has_round_command() && msg->round_command().job_id() == job_id_) {
      const auto& c = msg->round_command();
      const bool ends_round =
          (c.kind() == v1::RoundCommand::ABORT && c.epoch() >= cmd.epoch()) || c.kind() == v1::RoundCommand::STOP;
      if (ends_round && wan_) {
        std::cerr << "round " << cmd.round() << " epoch " << cmd.epoch() << ": cancelling its WAN exchange ("
                  << (c.kind() == v1::RoundCommand::STOP ? "STOP" : "ABORT: " + c.reason()) << ")\n";
        wan_->CancelThrough(cmd.epoch());
      }
    }
    backlog_.push_back(std::move(*msg));
  }
  return round.get();
}

std::optional<v1::ControlMessage> Worker::Receive(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{dealer_.handle(), 0, ZMQ_POLLIN, 0};
  if (PollOrInterrupted(&item, 1, timeout) <= 0) return std::nullopt;
  zmq::message_t frame;
  if (!dealer_.recv(frame, zmq::recv_flags::dontwait)) return std::nullopt;
  auto msg = proto::DecodeControl(frame.to_string_view());
  if (!msg.ok()) {
    std::cerr << "dropped a frame from the agent: " << msg.status().ToString() << "\n";
    return std::nullopt;
  }
  return std::move(*msg);
}

void Worker::OnStart(const v1::RoundCommand& cmd) {
  if (pending_) OnVerdict(false, pending_->first, pending_->second, "a new START arrived");
  v1::ControlMessage msg;
  auto* report = msg.mutable_round_report();
  report->set_job_id(job_id_);
  report->set_round(cmd.round());
  report->set_epoch(cmd.epoch());
  report->set_region(options_.region);
  auto result = RunRoundWatched(cmd);
  if (!result.ok()) {
    std::cerr << "round " << cmd.round() << " epoch " << cmd.epoch() << " failed: " << result.status().ToString() << "\n";
    report->set_ok(false);
    *report->mutable_error() = proto::ToWireError(result.status());
    Send(std::move(msg));
    return;
  }
  pending_ = {cmd.round(), cmd.epoch()};
  if (cmd.checkpoint() && !cmd.checkpoint_dir().empty()) {
    // Written before the verdict (the report carries its path); deleted if the
    // round does not commit, so only committed rounds leave files behind.
    const auto path = CheckpointPath(cmd.checkpoint_dir(), job_id_, options_.region, cmd.round());
    Status s = replica_->WriteCheckpoint(path, {{"job_id", job_id_},
                                                {"round", std::to_string(cmd.round())},
                                                {"epoch", std::to_string(cmd.epoch())},
                                                {"region", options_.region},
                                                {"param_hash", result->param_hash}});
    if (!s.ok()) {
      report->set_ok(false);
      *report->mutable_error() = proto::ToWireError(s.WithContext("checkpoint"));
      Send(std::move(msg));
      return;
    }
    if (options_.rank == 0) {
      pending_checkpoint_ = path;
      report->set_checkpoint_path(path.string());
    }
  }
  report->set_ok(true);
  report->set_param_hash(result->param_hash);
  report->set_loss(result->loss);
  report->set_val_loss(result->val_loss);
  report->set_tokens(result->tokens);
  report->set_wan_bytes_sent(result->wan_bytes_sent);
  report->set_compute_seconds(result->compute_seconds);
  report->set_comm_seconds(result->comm_seconds);
  report->set_wall_seconds(result->wall_seconds);
  std::cerr << "round " << cmd.round() << " epoch " << cmd.epoch() << ": hash " << result->param_hash << " loss "
            << result->loss << " val " << result->val_loss << "\n";
  Send(std::move(msg));
  if (options_.rank == 0) ReportLinks(cmd);
}

void Worker::ReportLinks(const v1::RoundCommand& cmd) {
  const auto measured = wan_->measurements();
  v1::ControlMessage msg;
  auto* report = msg.mutable_link_report();
  report->set_region(options_.region);
  for (const auto& p : cmd.participants()) {
    if (p.region() == options_.region || p.shard_endpoints_size() <= options_.rank) continue;
    auto it = measured.find(p.shard_endpoints(options_.rank));
    if (it == measured.end() || (it->second.bytes_per_second <= 0 && it->second.rtt_seconds <= 0)) continue;
    auto* link = report->add_links();
    link->set_peer(p.region());
    link->set_bytes_per_second(it->second.bytes_per_second);
    link->set_rtt_seconds(it->second.rtt_seconds);
  }
  if (report->links_size() > 0) Send(std::move(msg));
}

void Worker::DropPendingCheckpoint() {
  if (pending_checkpoint_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(pending_checkpoint_, ec);
  pending_checkpoint_.clear();
}

void Worker::OnVerdict(bool committed, uint32_t round, uint64_t epoch, const std::string& why) {
  if (!pending_ || pending_->first != round || pending_->second != epoch) return;  // stale
  if (committed) {
    replica_->Commit();
    pending_checkpoint_.clear();
  } else {
    std::cerr << "round " << round << " epoch " << epoch << " rolled back: " << why << "\n";
    replica_->Rollback();
    DropPendingCheckpoint();
  }
  pending_.reset();
}

int Worker::Serve() {
  for (;;) {
    std::optional<v1::ControlMessage> msg;
    if (!backlog_.empty()) {
      msg = std::move(backlog_.front());
      backlog_.pop_front();
    } else {
      msg = Receive(std::chrono::milliseconds(-1));
      if (!msg) continue;
    }
    if (msg->has_round_verdict()) {
      const auto& v = msg->round_verdict();
      if (v.job_id() == job_id_) OnVerdict(v.committed(), v.round(), v.epoch(), v.reason());
      continue;
    }
    if (!msg->has_round_command() || msg->round_command().job_id() != job_id_) continue;
    const auto& cmd = msg->round_command();
    switch (cmd.kind()) {
      case v1::RoundCommand::START: OnStart(cmd); break;
      case v1::RoundCommand::ABORT:
        if (pending_) OnVerdict(false, pending_->first, pending_->second, "ABORT: " + cmd.reason());
        break;
      case v1::RoundCommand::STOP: return 0;
      default: break;
    }
  }
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  Worker worker(options);
  Status s = worker.StartUp();
  if (!s.ok()) {
    std::cerr << "worker " << options.rank << " of region " << options.region << " cannot start: " << s.ToString() << "\n";
    worker.SayHello(s);
    return 2;
  }
  worker.SayHello(s);
  return worker.Serve();
}

}  // namespace longhaul::region_agent
