#include "longhaul/region_agent/agent.h"

#include "drop_log.h"
#include "zmq_poll.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "longhaul/common/printable_text.h"
#include "longhaul/common/random_token.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/wire_timeouts.h"
#include "longhaul/region_agent/capacity.h"
#include "longhaul/worker/job_config.h"
#include "longhaul/region_agent/region_report.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::region_agent {
namespace {

constexpr const char* kSessionEndpoint = "inproc://longhaul-agent-session";

}  // namespace

Agent::Agent(AgentOptions options) : options_(std::move(options)), drops_(std::make_unique<DropLog>()) {}

Agent::~Agent() {
  if (session_) session_->Stop();
  jobs_.clear();  // stops processes
}

Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  const AgentOptions& o = agent->options_;

  std::filesystem::path bin_dir = o.bin_dir;
  if (bin_dir.empty()) {
    auto self = SelfBinaryDir();
    if (!self.ok()) return self.status();
    bin_dir = *self;
  }
  agent->worker_binary_ = bin_dir / "longhaul-worker";
  agent->linkem_binary_ = bin_dir / "longhaul-linkem";
  agent->task_binary_ = bin_dir / "longhaul-task";
  // The build puts the Python package (longhaul.torch) in <build>/python, next
  // to <build>/bin; command workers find it through PYTHONPATH.
  if (std::error_code ec; std::filesystem::is_directory(bin_dir / ".." / "python" / "longhaul", ec)) {
    agent->python_path_ = std::filesystem::weakly_canonical(bin_dir / ".." / "python", ec);
  }
  if (::access(agent->worker_binary_.c_str(), X_OK) != 0) {
    return NotFound("worker binary " + agent->worker_binary_.string() + " is missing or not executable");
  }
  if (o.launcher.kind == LauncherKind::kSlurm && ::access(agent->task_binary_.c_str(), X_OK) != 0) {
    return NotFound("--launcher slurm needs " + agent->task_binary_.string() + ", which is missing");
  }
  if (EmulatesWan(o.wan_rate_mbit, o.wan_delay_ms, o.wan_jitter_ms) && ::access(agent->linkem_binary_.c_str(), X_OK) != 0) {
    return NotFound("--wan-rate-mbit/--wan-delay-ms/--wan-jitter-ms need " + agent->linkem_binary_.string() +
                    ", which is missing");
  }
  std::error_code ec;
  std::filesystem::create_directories(o.work_dir, ec);
  if (ec) return Unavailable("cannot create --work-dir " + o.work_dir.string() + ": " + ec.message());
  if (o.worker_limits.any()) {
    auto root = CgroupRoot::Find();
    if (!root.ok()) return root.status().WithContext("--worker-memory-max/--worker-pids-max need a cgroup per launch");
    agent->cgroups_ = *root;
    spdlog::info("each launch in a cgroup of its own under {} (cgroup {}): memory {} bytes, {} processes (0 = no limit)",
                 root->parents().front().string(), root->unified() ? "v2" : "v1", o.worker_limits.memory_bytes,
                 o.worker_limits.pids);
  } else {
    spdlog::info("workers are contained by their process groups only (a cgroup per launch comes with "
                 "--worker-memory-max or --worker-pids-max)");
  }
  if (o.run_as) {
    LONGHAUL_RETURN_IF_ERROR(CheckCanSwitchUser(*o.run_as));
    // Workers may pass through the work root to their own job folder (0700,
    // theirs) but not list it or read the agent's files in it.
    if (::chmod(o.work_dir.c_str(), 0711) != 0) {
      return Unavailable("cannot make --work-dir " + o.work_dir.string() + " mode 0711: " + std::strerror(errno));
    }
  }

  SessionOptions session;
  session.region = o.region;
  session.orchestrator = o.orchestrator;
  session.insecure = o.insecure;
  session.capacity = ProbeCapacity(o.workers);
  session.data_host = o.data_host;
  session.session_id = RandomToken();
  session.controller_endpoint = kSessionEndpoint;
  session.timeouts = o.timeouts;
  if (!o.insecure) {
    auto keys = wan_transport::LoadKeyPair(o.key_file);
    if (!keys.ok()) return keys.status().WithContext("--key");
    auto server = wan_transport::LoadPublicKey(o.orchestrator_public_key);
    if (!server.ok()) return server.status().WithContext("--orchestrator-public-key");
    session.keys = *keys;
    session.server_public_key = *server;
  }

  try {
    agent->session_pair_ = std::make_unique<zmq::socket_t>(agent->ctx_, zmq::socket_type::pair);
    agent->session_pair_->set(zmq::sockopt::linger, 0);
    agent->session_pair_->bind(kSessionEndpoint);
    // The workers' socket: hello, reports, the rendezvous store. CURVE with a
    // key pair of its own (workers learn the public key from their
    // environment; it is not the agent's control-plane identity); every
    // request carries its launch's token, which is what admits it.
    agent->workers_socket_ = std::make_unique<zmq::socket_t>(agent->ctx_, zmq::socket_type::router);
    agent->workers_socket_->set(zmq::sockopt::linger, 0);
    agent->workers_socket_->set(zmq::sockopt::router_mandatory, 1);
    if (!o.insecure) {
      auto keys = wan_transport::GenerateCurveKeyPair();
      if (!keys.ok()) return keys.status().WithContext("worker socket key pair");
      wan_transport::MakeCurveServer(*agent->workers_socket_, *keys);
      agent->worker_public_key_ = keys->public_key;
    }
    agent->workers_socket_->bind("tcp://" + o.worker_bind + ":0");
    agent->worker_endpoint_ = agent->workers_socket_->get(zmq::sockopt::last_endpoint);
    spdlog::info("worker socket {} ({}a hello must carry its launch's token)", agent->worker_endpoint_,
                 o.insecure ? "" : "CURVE; ");
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("binding agent sockets: ") + e.what());
  }

  auto metrics = monitoring::MetricsServer::Start({.bind_address = o.metrics_bind, .web_config_file = o.metrics_web_config});
  if (!metrics.ok()) return metrics.status().WithContext("--metrics");
  agent->metrics_ = std::move(*metrics);
  agent->agent_metrics_ = std::make_unique<AgentMetrics>(agent->metrics_->registry(), o.region);
  agent->session_ = std::make_unique<OrchestratorSession>(agent->ctx_, std::move(session), agent->health_);
  return agent;
}

Status Agent::Run(const std::atomic<bool>& stop) {
  session_->Start();
  agent_metrics_->SetUp(true);
  while (!stop) {
    zmq::pollitem_t items[] = {{session_pair_->handle(), 0, ZMQ_POLLIN, 0},
                               {workers_socket_->handle(), 0, ZMQ_POLLIN, 0}};
    PollOrInterrupted(items, 2, std::chrono::milliseconds(50));
    zmq::message_t frame;
    while (session_pair_->recv(frame, zmq::recv_flags::dontwait)) HandleOrchestratorFrame(frame);
    for (;;) {
      zmq::message_t id;
      if (!workers_socket_->recv(id, zmq::recv_flags::dontwait)) break;
      zmq::message_t body;
      if (!id.more() || !workers_socket_->recv(body, zmq::recv_flags::dontwait)) continue;
      while (body.more()) {  // a well-behaved worker sends one frame; drain any extra
        zmq::message_t extra;
        if (!workers_socket_->recv(extra, zmq::recv_flags::dontwait)) break;
        if (!extra.more()) break;
      }
      HandleWorkerFrame(id.to_string(), body);
    }
    Supervise();
    PublishState();
  }
  spdlog::info("agent {} stopping: {} job(s) to stop", options_.region, jobs_.size());
  agent_metrics_->SetUp(false);
  for (auto& [id, job] : jobs_) job->BeginStop(options_.worker_stop_grace);
  const auto deadline = DeadlineAfter(options_.worker_stop_grace + std::chrono::seconds(2));
  for (auto& [id, job] : jobs_) {
    while (!job->FinishStop() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  jobs_.clear();
  session_->Stop();
  return Status::Ok();
}

void Agent::SendToOrchestrator(v1::ControlMessage msg) {
  msg.set_sender(options_.region);
  msg.set_request_id(++request_id_);
  const std::string frame = proto::EncodeControl(std::move(msg));
  session_pair_->send(zmq::buffer(frame), zmq::send_flags::none);
}

void Agent::SendToWorker(const std::string& routing_id, const std::string& frame, const std::string& job_id) {
  try {
    workers_socket_->send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    workers_socket_->send(zmq::buffer(frame), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {  // EHOSTUNREACH: the worker is gone; supervision reports it
    spdlog::warn("job {}: cannot reach a worker: {}", PrintableTail(job_id, 64), e.what());
  }
}

void Agent::SendToWorkers(RegionJob& job, const v1::ControlMessage& msg) {
  const std::string frame = proto::EncodeControl(msg);
  for (const auto& id : job.routing_ids()) {
    if (!id.empty()) SendToWorker(id, frame, job.job_id());
  }
}

void Agent::Reject(const std::string& job_id, const Status& status, const std::string& worker_output) {
  spdlog::error("rejecting job {}: {}", job_id, status.ToString());
  agent_metrics_->OnJobRejected();
  v1::ControlMessage msg;
  auto* r = msg.mutable_job_rejected();
  r->set_job_id(job_id);
  r->set_region(options_.region);
  *r->mutable_error() = proto::ToWireError(status);
  r->mutable_error()->set_worker_output(worker_output);
  SendToOrchestrator(std::move(msg));
}

void Agent::HandleOrchestratorFrame(const zmq::message_t& frame) {
  auto msg = proto::DecodeControl(frame.to_string_view());
  if (!msg.ok()) {
    spdlog::warn("dropped a frame from the orchestrator: {}", msg.status().ToString());
    return;
  }
  switch (msg->body_case()) {
    case v1::ControlMessage::kJobAssignment: OnAssignment(msg->job_assignment()); break;
    case v1::ControlMessage::kRoundCommand: OnRoundCommand(msg->round_command()); break;
    case v1::ControlMessage::kRoundVerdict: OnVerdict(msg->round_verdict()); break;
    case v1::ControlMessage::kError:
      spdlog::warn("orchestrator error: {}", proto::FromWireError(msg->error()).ToString());
      break;
    default:
      spdlog::warn("ignored unexpected {} from the orchestrator", proto::BodyName(*msg));
  }
}

void Agent::SendJobReady(const RegionJob& job) {
  v1::ControlMessage msg;
  auto* ready = msg.mutable_job_ready();
  ready->set_job_id(job.job_id());
  ready->set_region(options_.region);
  *ready->mutable_endpoint() = *job.endpoint();
  ready->set_restored_round(job.restored_round());
  ready->set_intra_region(job.intra_region());
  ready->set_intra_region_reason(job.intra_region_reason());
  ready->set_param_hash(job.start_param_hash());
  SendToOrchestrator(std::move(msg));
}

void Agent::OnAssignment(const v1::JobAssignment& a) {
  if (auto it = jobs_.find(a.job_id()); it != jobs_.end() && it->second->phase() != RegionJob::Phase::kStopping &&
                                        it->second->assignment().checkpoint_path() == a.checkpoint_path()) {
    // Re-sent (e.g. after an orchestrator restart): answer again, launch nothing.
    if (it->second->endpoint()) SendJobReady(*it->second);
    return;
  }
  auto config = worker::AdmitJob(a, options_.region, options_.workers);
  if (!config.ok()) return Reject(a.job_id(), config.status());
  // The orchestrator owns the timeouts; an older one sends none and ours serve.
  const Result<Timeouts> timeouts =
      a.has_timeouts() ? proto::TimeoutsFromWire(a.timeouts(), "the assignment's timeouts") : options_.timeouts;
  if (!timeouts.ok()) return Reject(a.job_id(), timeouts.status());
  auto program = options_.commands.Check(*config, options_.region);
  if (!program.ok()) return Reject(a.job_id(), program.status());
  if (config->command) config->command->argv.front() = program->string();  // exactly the file checked
  if (auto old = jobs_.find(a.job_id()); old != jobs_.end()) {
    // Assigned again while its previous launch here is still stopping (a worker
    // or link emulator died and the orchestrator wants the region back), or to
    // restore a checkpoint the running launch did not start from: end that
    // launch now (bounded: SIGTERM, then SIGKILL after 500 ms) so its slots
    // are free for the new one. Counting them as busy refused the rejoin, and
    // the region was lost to the job for good.
    spdlog::info("job {}: assigned again; ending its previous launch first", a.job_id());
    for (auto r = routes_.begin(); r != routes_.end();) r = r->second.first == a.job_id() ? routes_.erase(r) : std::next(r);
    jobs_.erase(old);
  }
  int busy = 0;
  for (auto& [id, job] : jobs_) busy += job->workers();
  if (busy + static_cast<int>(config->workers) > options_.workers) {
    return Reject(a.job_id(), ResourceExhausted("job " + a.job_id() + " needs " + std::to_string(config->workers) +
                                                " workers; region " + options_.region + " has " +
                                                std::to_string(options_.workers - busy) + " free of " +
                                                std::to_string(options_.workers)));
  }
  JobLaunchOptions launch;
  launch.worker_binary = worker_binary_;
  launch.linkem_binary = linkem_binary_;
  launch.task_binary = task_binary_;
  launch.launcher = options_.launcher;
  // Workers may run on other hosts only when they can reach this agent and
  // bind on their own host's address; otherwise Slurm runs them here.
  launch.launcher.slurm.this_host_only = !options_.workers_may_be_remote();
  launch.job_dir = options_.work_dir / a.job_id();
  launch.launch_root = options_.work_dir / ".launches" / a.job_id();
  launch.agent_endpoint = worker_endpoint_;
  launch.agent_public_key = worker_public_key_;
  launch.region = options_.region;
  launch.data_host = options_.data_host;
  launch.agent_host = options_.worker_bind;
  launch.insecure = options_.insecure;
  launch.run_as = options_.run_as;
  launch.cgroups = cgroups_ ? &*cgroups_ : nullptr;
  launch.limits = options_.worker_limits;
  launch.wan_rate_mbit = options_.wan_rate_mbit;
  launch.wan_delay_ms = options_.wan_delay_ms;
  launch.wan_jitter_ms = options_.wan_jitter_ms;
  launch.launch_id = ++launches_;
  launch.timeouts = *timeouts;
  launch.python_path = python_path_;
  launch.validation_batches = options_.validation_batches;
  launch.compute_throttle_percent = options_.compute_throttle_percent;
  launch.start_timeout = options_.worker_start_timeout;
  auto job = RegionJob::Launch(*config, a, launch);
  if (!job.ok()) return Reject(a.job_id(), job.status());
  spdlog::info("job {}: launched {} worker(s) (round {}{})", a.job_id(), config->workers, a.start_round(),
               a.checkpoint_path().empty() ? "" : ", restoring " + a.checkpoint_path());
  health_.ClearUnhealthy();
  failed_jobs_.erase(a.job_id());
  jobs_[a.job_id()] = std::move(*job);
}

void Agent::OnRoundCommand(const v1::RoundCommand& cmd) {
  auto it = jobs_.find(cmd.job_id());
  RegionJob* job = it == jobs_.end() ? nullptr : it->second.get();
  if (cmd.kind() == v1::RoundCommand::START) {
    if (job == nullptr || job->phase() != RegionJob::Phase::kReady) {
      std::string why = "job " + cmd.job_id() + " is not running in region " + options_.region;
      if (job != nullptr) why += job->phase() == RegionJob::Phase::kLaunching ? " (workers still starting)" : " (stopping)";
      if (auto f = failed_jobs_.find(cmd.job_id()); f != failed_jobs_.end()) why += ": " + f->second;
      v1::Error err;
      err.set_code(job == nullptr ? v1::ERROR_CODE_NOT_FOUND : v1::ERROR_CODE_FAILED_PRECONDITION);
      err.set_message(why);
      v1::ControlMessage msg;
      *msg.mutable_round_report() = FailedRoundReport(cmd, options_.region, err);
      SendToOrchestrator(std::move(msg));
      return;
    }
    job->BeginRound(cmd);
    spdlog::info("job {} round {} epoch {}: started on {} worker(s), {} region(s)", cmd.job_id(), cmd.round(),
                 cmd.epoch(), job->workers(), cmd.participants_size());
  } else if (job == nullptr) {
    spdlog::info("dropped round command for unknown job {}", cmd.job_id());
    return;
  } else if (cmd.kind() == v1::RoundCommand::ABORT) {
    if (job->current_round() && job->current_round()->epoch() <= cmd.epoch()) job->EndRound();
  } else if (cmd.kind() == v1::RoundCommand::STOP) {
    spdlog::info("job {}: STOP ({})", cmd.job_id(), cmd.reason());
    v1::ControlMessage msg;
    *msg.mutable_round_command() = cmd;
    SendToWorkers(*job, msg);
    // A completed job's workers are past their last round: their own code after
    // the loop runs. Otherwise (cancel, placed again) SIGTERM, then the grace.
    job->BeginStop(std::chrono::seconds(job->config().exit_grace_s),
                   cmd.job_completed() ? RegionJob::StopMode::kLetFinish : RegionJob::StopMode::kTerminate,
                   options_.worker_stop_grace);
    return;
  } else {
    spdlog::warn("job {}: round command of unknown kind {}", cmd.job_id(), static_cast<int>(cmd.kind()));
    return;
  }
  v1::ControlMessage msg;
  *msg.mutable_round_command() = cmd;
  SendToWorkers(*job, msg);
}

void Agent::OnVerdict(const v1::RoundVerdict& verdict) {
  auto it = jobs_.find(verdict.job_id());
  if (it == jobs_.end() || it->second->phase() != RegionJob::Phase::kReady) return;
  it->second->OnVerdict(verdict);
  v1::ControlMessage msg;
  *msg.mutable_round_verdict() = verdict;
  SendToWorkers(*it->second, msg);
}

void Agent::OnStoreRequest(const std::string& routing_id, uint64_t request_id, const v1::StoreRequest& request) {
  v1::ControlMessage out;
  out.set_sender(options_.region);
  out.set_request_id(request_id);
  auto it = jobs_.find(request.job_id());
  if (it == jobs_.end()) {
    *out.mutable_store_reply()->mutable_error() =
        proto::ToWireError(NotFound("job " + PrintableTail(request.job_id(), 64) + " does not run in region " + options_.region));
  } else {
    *out.mutable_store_reply() = it->second->OnStore(request);
  }
  if (out.store_reply().has_error()) drops_->Drop("store request: " + out.store_reply().error().message());
  SendToWorker(routing_id, proto::EncodeControl(std::move(out)), request.job_id());
}

void Agent::HandleWorkerFrame(const std::string& routing_id, const zmq::message_t& frame) {
  auto msg = proto::DecodeControl(frame.to_string_view());
  if (!msg.ok()) return drops_->Drop("a frame that is not a control message: " + msg.status().ToString());
  if (msg->has_worker_hello()) return OnHello(routing_id, msg->worker_hello());
  if (msg->has_store_request()) return OnStoreRequest(routing_id, msg->request_id(), msg->store_request());
  auto route = routes_.find(routing_id);
  if (route == routes_.end()) {
    return drops_->Drop(std::string(proto::BodyName(*msg)) + " from a connection that never said hello");
  }
  if (msg->has_link_report()) {  // worker 0's WAN measurements: for the orchestrator's scheduler
    if (msg->link_report().region() != options_.region) return;
    v1::ControlMessage out;
    *out.mutable_link_report() = msg->link_report();
    SendToOrchestrator(std::move(out));
    return;
  }
  auto it = jobs_.find(route->second.first);
  if (it == jobs_.end() || !msg->has_round_report()) return;
  auto region_report = it->second->OnWorkerReport(route->second.second, msg->round_report());
  if (!region_report) return;
  agent_metrics_->OnRoundReport(*region_report);
  spdlog::info("job {} round {} epoch {}: ok={} hash={} loss={:.4f} val_loss={:.4f}{}", region_report->job_id(),
               region_report->round(), region_report->epoch(), region_report->ok(), region_report->param_hash(),
               region_report->loss(), region_report->val_loss(),
               region_report->ok() ? "" : " error: " + region_report->error().message());
  v1::ControlMessage out;
  *out.mutable_round_report() = std::move(*region_report);
  SendToOrchestrator(std::move(out));
}

void Agent::OnHello(const std::string& routing_id, const v1::WorkerHello& hello) {
  auto it = jobs_.find(hello.job_id().substr(0, 128));
  if (it == jobs_.end() || it->second->phase() != RegionJob::Phase::kLaunching) {
    return drops_->Drop("a hello for job '" + hello.job_id().substr(0, 64) + "' rank " +
                        std::to_string(hello.worker_rank()) + ": no such job is launching");
  }
  RegionJob& job = *it->second;
  if (!job.Authenticates(hello.worker_rank(), hello.token())) {  // not a process this launch started: the job is not touched
    return drops_->Drop("a hello for job " + job.job_id() + " rank " + std::to_string(hello.worker_rank()) +
                        " without its launch's token");
  }
  Status s = job.OnHello(routing_id, hello);
  if (!s.ok()) {
    Reject(job.job_id(), s.WithContext("job " + job.job_id() + " in region " + options_.region));
    failed_jobs_[job.job_id()] = s.message();
    job.BeginStop(options_.worker_stop_grace);
    return;
  }
  routes_[routing_id] = {job.job_id(), static_cast<int>(hello.worker_rank())};
  if (!job.all_hellos()) return;
  auto endpoint = job.MakeReady();
  if (!endpoint.ok()) {
    Reject(job.job_id(), endpoint.status());
    job.BeginStop(options_.worker_stop_grace);
    return;
  }
  spdlog::info("job {}: {} worker(s) ready, {} parameters", job.job_id(), job.workers(), job.num_params());
  SendJobReady(job);

  // Facts for the scheduler's predicted communication time and `longhaul status`.
  v1::ControlMessage facts_msg;
  auto* facts = facts_msg.mutable_job_facts();
  facts->set_job_id(job.job_id());
  facts->set_region(options_.region);
  facts->set_parameter_count(job.num_params());
  if (auto codec = sync_policies::Compressor::Create(job.config().compression); codec.ok()) {
    facts->set_payload_bytes((*codec)->EncodedBytes(job.num_params()));
  }
  facts->set_loss_floor(job.loss_floor());
  SendToOrchestrator(std::move(facts_msg));
}

void Agent::FailJob(RegionJob& job, const RegionJob::Failure& failure, bool crash) {
  // The operator's log has the worker's output; the orchestrator gets it apart
  // from the reason, for the job's owner only (heartbeats carry no output).
  const std::string& detail = failure.what;
  spdlog::error("{}{}{}", detail, failure.output.empty() ? "" : "; last output of ", failure.output);
  if (crash) {
    agent_metrics_->OnWorkerCrash();
    health_.MarkUnhealthy(detail, options_.unhealthy_hold);
  }
  failed_jobs_[job.job_id()] = detail;
  v1::Error err;
  // FAILED_PRECONDITION: the job no longer runs in this region (it is being
  // stopped below), so the orchestrator drops the region from the retry and
  // assigns it the job afresh. A retry that still listed it would leave the
  // survivors' workers waiting on a dead peer for a whole collective timeout.
  err.set_code(v1::ERROR_CODE_FAILED_PRECONDITION);
  err.set_message(detail);
  err.set_worker_output(failure.output);
  if (job.phase() == RegionJob::Phase::kLaunching) {
    Reject(job.job_id(), Unavailable(detail + " (at start-up)"), failure.output);
  } else if (job.current_round()) {
    v1::ControlMessage msg;
    *msg.mutable_round_report() = FailedRoundReport(*job.current_round(), options_.region, err);
    SendToOrchestrator(std::move(msg));
    job.EndRound();
  }
  job.BeginStop(options_.worker_stop_grace);
}

void Agent::Supervise() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    RegionJob& job = *it->second;
    if (auto crash = job.CheckProcesses()) {
      FailJob(job, *crash, true);
    } else if (job.launch_expired()) {
      FailJob(job, job.MissingHellos(), false);
    } else if (auto hung = job.RoundOverdue(job.timeouts().round)) {
      FailJob(job, *hung, true);
    }
    if (job.phase() == RegionJob::Phase::kStopping && job.FinishStop()) {
      for (auto r = routes_.begin(); r != routes_.end();) r = r->second.first == job.job_id() ? routes_.erase(r) : std::next(r);
      spdlog::info("job {}: all processes stopped", job.job_id());
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

void Agent::PublishState() {
  std::vector<std::string> running;
  int workers = 0;
  for (auto& [id, job] : jobs_) {
    running.push_back(id);  // stopping jobs too: their processes still hold the slots
    workers += job->workers_running();
  }
  health_.SetRunningJobs(std::move(running));
  agent_metrics_->SetWorkersRunning(workers);
}

}  // namespace longhaul::region_agent
