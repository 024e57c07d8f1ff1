#include "longhaul/region_agent/region_job.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fstream>
#include <sstream>

#include "longhaul/common/printable_text.h"
#include "longhaul/common/random_token.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/region_agent/region_report.h"
#include "longhaul/session/local_address.h"
#include "longhaul/session/session_options.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::region_agent {
namespace {

std::string Fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string StripScheme(const std::string& endpoint) {
  const auto p = endpoint.find("://");
  return p == std::string::npos ? endpoint : endpoint.substr(p + 3);
}

}  // namespace

Result<std::unique_ptr<RegionJob>> RegionJob::Launch(const worker::JobConfig& config, const v1::JobAssignment& assignment,
                                                     const JobLaunchOptions& options) {
  std::unique_ptr<RegionJob> job(new RegionJob());
  job->config_ = config;
  job->assignment_ = assignment;
  job->options_ = options;
  std::error_code ec;
  std::filesystem::create_directories(options.job_dir, ec);
  if (ec) return Unavailable("cannot create job folder " + options.job_dir.string() + ": " + ec.message());
  // The job folder is the workers' (checkpoints, their own files); what the
  // agent writes for a launch goes into a fresh launch folder first.
  if (options.run_as) LONGHAUL_RETURN_IF_ERROR(HandOver(options.job_dir, *options.run_as, 0700));
  job->start_deadline_ = DeadlineAfter(options.start_timeout);
  LONGHAUL_RETURN_IF_ERROR(job->SpawnWorkers());
  return job;
}

RegionJob::~RegionJob() {
  for (auto& w : workers_) w.child.Stop(std::chrono::milliseconds(500));
  for (auto& l : linkems_) l.Stop(std::chrono::milliseconds(500));
  launcher_.reset();  // what the scheduler still runs for the launch is cancelled
  cgroup_.reset();  // kills what is left in it, removes it
}

std::filesystem::path RegionJob::log_file(int rank) const {
  return WorkerLogPath(options_.job_dir, rank);
}

SpawnOptions RegionJob::WorkerSpawn(int rank, int master_port) const {
  session::SessionOptions so;
  so.agent_endpoint = options_.agent_endpoint;
  so.agent_public_key = options_.agent_public_key;
  so.job_id = config_.job_id;
  so.region = options_.region;
  so.rank = rank;
  so.wan_host = options_.data_host;
  so.insecure = options_.insecure;
  so.collective_timeout = options_.timeouts.collective;
  so.link_io = options_.timeouts.link_io;
  so.validation_batches = options_.validation_batches;
  so.compute_throttle_percent = options_.compute_throttle_percent;
  so.worker_token = tokens_.at(static_cast<size_t>(rank));
  SpawnOptions spawn;
  spawn.log_file = log_file(rank);
  spawn.run_as = options_.run_as;
  if (cgroup_) spawn.cgroup_procs_fds = cgroup_->procs_fds();
  spawn.env = session::WorkerEnvironment(so, static_cast<int>(config_.workers), options_.own_host(), master_port);
  if (!config_.command) {
    spawn.program = options_.worker_binary;
    return spawn;
  }
  const auto& cmd = *config_.command;
  spawn.program = cmd.argv.front();
  spawn.args.assign(cmd.argv.begin() + 1, cmd.argv.end());
  for (const auto& [k, v] : cmd.env) spawn.env[k] = v;  // reserved names were refused at validation
  if (!options_.python_path.empty()) {
    std::string rest;
    if (auto it = cmd.env.find("PYTHONPATH"); it != cmd.env.end()) {
      rest = it->second;
    } else if (const char* p = std::getenv("PYTHONPATH")) {
      rest = p;
    }
    spawn.env["PYTHONPATH"] = options_.python_path.string() + (rest.empty() ? "" : ":" + rest);
  }
  spawn.env["PYTHONUNBUFFERED"] = spawn.env.count("PYTHONUNBUFFERED") ? spawn.env["PYTHONUNBUFFERED"] : "1";
  spawn.working_dir = cmd.working_dir.empty() ? options_.job_dir : std::filesystem::path(cmd.working_dir);
  return spawn;
}

Status RegionJob::SpawnWorkers() {
  const int n = static_cast<int>(config_.workers);
  // Each launch is named by a folder of the agent's own (launch_root, outside
  // the job folder the workers own): the next free launch-N from launch_id, as
  // an earlier agent process may have left some behind.
  std::error_code ec;
  std::filesystem::create_directories(options_.launch_root, ec);
  if (ec) return Unavailable("cannot create " + options_.launch_root.string() + ": " + ec.message());
  for (uint64_t id = options_.launch_id;; ++id) {
    launch_dir_ = options_.launch_root / ("launch-" + std::to_string(id));
    if (std::filesystem::create_directory(launch_dir_, ec)) break;
    if (ec) return Unavailable("cannot create " + launch_dir_.string() + ": " + ec.message());
  }
  // What the workers read first, from the launch's store (over the worker
  // socket, on any host, no file): the assignment and, unless insecure, the
  // launch's WAN identity, which is for this launch only (they never see the
  // agent's control-plane key; peers learn the public key from the round).
  LONGHAUL_RETURN_IF_ERROR(store_.Set(session::kAssignmentStoreKey, assignment_.SerializeAsString()));
  if (!options_.insecure) {
    LONGHAUL_ASSIGN_OR_RETURN(auto keys, wan_transport::GenerateCurveKeyPair());
    LONGHAUL_RETURN_IF_ERROR(store_.Set(session::kWanSecretStoreKey, keys.secret_key));
    wan_public_key_ = keys.public_key;
  }
  if (options_.cgroups != nullptr) {
    const std::string name = "longhaul-" + options_.region + "-" + config_.job_id + "-" + launch_dir_.filename().string();
    LONGHAUL_ASSIGN_OR_RETURN(cgroup_, LaunchCgroup::Create(*options_.cgroups, name, options_.limits));
  }
  routing_ids_.assign(n, "");
  wan_endpoints_.assign(n, "");
  tokens_.clear();
  for (int rank = 0; rank < n; ++rank) tokens_.push_back(RandomToken());
  auto free_port = session::FreeTcpPort();
  if (!free_port.ok()) return free_port.status().WithContext("MASTER_PORT for torch.distributed");
  const int master_port = *free_port;
  LaunchRequest request;
  request.workers = n;
  request.name = "longhaul-" + options_.region + "-" + config_.job_id + "-" + launch_dir_.filename().string();
  request.spawn = [&](int rank) { return WorkerSpawn(rank, master_port); };
  request.task_binary = options_.task_binary;
  request.log_dir = options_.job_dir;
  launcher_ = MakeWorkerLauncher(options_.launcher);
  LONGHAUL_ASSIGN_OR_RETURN(workers_, launcher_->Start(request));
  return Status::Ok();
}

int RegionJob::workers_running() {
  int n = 0;
  for (auto& w : workers_) n += w.child.Poll() ? 0 : (w.rank >= 0 ? 1 : workers());
  return n;
}

RegionJob::Failure RegionJob::MissingHellos() const {
  std::string missing;
  int first = -1;
  for (size_t i = 0; i < routing_ids_.size(); ++i) {
    if (!routing_ids_[i].empty()) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    if (first < 0) first = static_cast<int>(i);
  }
  std::string what = "job " + config_.job_id + ": worker(s) " + missing + " did not report ready within " +
                     std::to_string(options_.start_timeout.count() / 1000) + " s (never connected to the agent)";
  // A scheduler that never started them says why ("slurm job 12 PENDING (Resources)").
  if (const std::string state = launcher_ ? launcher_->SchedulerState() : ""; !state.empty()) what += "; " + state;
  return {what, first >= 0 ? WorkerOutput(first) : ""};
}

bool RegionJob::Authenticates(uint32_t rank, const std::string& token) const {
  return rank < tokens_.size() && TokensEqual(token, tokens_[rank]);
}

v1::StoreReply RegionJob::OnStore(const v1::StoreRequest& request) {
  if (!Authenticates(request.worker_rank(), request.token())) {
    v1::StoreReply refused;
    *refused.mutable_error() = proto::ToWireError(PermissionDenied(
        "job " + config_.job_id + ": a store request without this launch's token for worker " +
        std::to_string(request.worker_rank())));
    return refused;
  }
  return store_.Serve(request);
}

Status RegionJob::OnHello(const std::string& routing_id, const v1::WorkerHello& hello) {
  const uint32_t rank = hello.worker_rank();
  if (rank >= routing_ids_.size()) {
    return InvalidArgument("hello from worker rank " + std::to_string(rank) + " but the job has " +
                           std::to_string(routing_ids_.size()) + " workers");
  }
  if (hello.has_error() && hello.error().code() != v1::ERROR_CODE_UNSPECIFIED) {
    return Status(StatusCode::kInvalidArgument, "worker " + std::to_string(rank) + ": " + hello.error().message());
  }
  if (hello.wan_endpoint().empty()) return InvalidArgument("worker " + std::to_string(rank) + " reported no WAN endpoint");
  if (assignment_.checkpoint_round() != 0 && hello.restored_round() != assignment_.checkpoint_round()) {
    // Every worker restores the assignment's checkpoint, verified against its round and hash.
    return DataLoss("worker " + std::to_string(rank) + " restored round " + std::to_string(hello.restored_round()) +
                    ", the assignment's checkpoint holds round " + std::to_string(assignment_.checkpoint_round()));
  }
  const v1::IntraRegion backend = hello.intra_region();
  if (backend != v1::INTRA_REGION_NCCL && backend != v1::INTRA_REGION_GLOO) {
    return InvalidArgument("worker " + std::to_string(rank) + " reported intra-region collectives '" +
                           std::string(proto::IntraRegionName(backend)) + "', not nccl or gloo");
  }
  if (intra_region_rank_ && backend != intra_region_) {
    // The ranks decide from the same facts, so they cannot differ unless one misbehaves.
    return DataLoss("worker " + std::to_string(rank) + " runs its intra-region collectives over " +
                    std::string(proto::IntraRegionName(backend)) + ", worker " + std::to_string(*intra_region_rank_) +
                    " over " + std::string(proto::IntraRegionName(intra_region_)));
  }
  routing_ids_[rank] = routing_id;
  wan_endpoints_[rank] = hello.wan_endpoint();
  if (!intra_region_rank_) {
    intra_region_rank_ = rank;
    intra_region_ = backend;
    // Shown to everyone who asks for the job's status: printable and short.
    intra_region_reason_ = PrintableTail(hello.intra_region_reason(), kMaxIntraRegionReasonBytes);
    std::replace(intra_region_reason_.begin(), intra_region_reason_.end(), '\n', ' ');  // one line in status
  }
  num_params_ = hello.num_params();
  restored_round_ = hello.restored_round();
  if (rank == 0) start_param_hash_ = hello.param_hash();
  loss_floor_ = hello.loss_floor();
  return Status::Ok();
}

bool RegionJob::all_hellos() const {
  for (const auto& r : routing_ids_) if (r.empty()) return false;
  return true;
}

Result<std::string> RegionJob::StartLinkem(const std::string& worker_endpoint) {
  SpawnOptions spawn;
  spawn.program = options_.linkem_binary;
  spawn.capture_stdout = true;
  const std::string name = "linkem-" + std::to_string(linkems_.size());
  spawn.log_file = options_.job_dir / (name + ".log");
  // Writing "rate-mbit=R delay-ms=D" into <job dir>/linkem-N.control reshapes
  // the running link (benchmarks and tests change a WAN link mid-job).
  spawn.args = {"--listen", options_.own_host() + ":0", "--forward", StripScheme(worker_endpoint),
                "--rate-mbit", Fmt(options_.wan_rate_mbit), "--delay-ms", Fmt(options_.wan_delay_ms),
                "--jitter-ms", Fmt(options_.wan_jitter_ms), "--control-file",
                (options_.job_dir / (name + ".control")).string()};
  auto child = ChildProcess::Spawn(spawn);
  if (!child.ok()) return child.status().WithContext("starting longhaul-linkem");
  auto line = child->ReadLine(DeadlineAfter(std::chrono::seconds(10)));
  linkems_.push_back(std::move(*child));
  if (!line.ok()) return line.status().WithContext("waiting for longhaul-linkem to listen");
  const std::string prefix = "listening on ";
  if (line->rfind(prefix, 0) != 0) return Internal("unexpected first line from longhaul-linkem: '" + *line + "'");
  return "tcp://" + line->substr(prefix.size());
}

Result<v1::PeerEndpoint> RegionJob::MakeReady() {
  v1::PeerEndpoint ep;
  ep.set_region(options_.region);
  ep.set_public_key(wan_public_key_);
  for (const auto& wan : wan_endpoints_) {
    if (EmulatesWan(options_.wan_rate_mbit, options_.wan_delay_ms, options_.wan_jitter_ms)) {
      auto via = StartLinkem(wan);
      if (!via.ok()) return via.status();
      ep.add_shard_endpoints(*via);
    } else {
      ep.add_shard_endpoints(wan);
    }
  }
  phase_ = Phase::kReady;
  endpoint_ = ep;
  return ep;
}

std::optional<RegionJob::Failure> RegionJob::CheckProcesses() {
  if (phase_ == Phase::kStopping) return std::nullopt;
  for (auto& w : workers_) {
    if (!w.child.Poll()) continue;
    if (last_round_committed_ && w.child.exited_cleanly()) continue;  // done with the job
    return ProcessFailure(w);
  }
  for (size_t i = 0; i < linkems_.size(); ++i) {
    if (linkems_[i].Poll()) {
      return Failure{"job " + config_.job_id + " link emulator of worker " + std::to_string(i) + " " +
                         linkems_[i].DescribeExit(),
                     ""};
    }
  }
  return std::nullopt;
}

RegionJob::Failure RegionJob::ProcessFailure(const LaunchedProcess& process) const {
  Failure f{"job " + config_.job_id + " " + process.name + " " + process.child.DescribeExit(), ""};
  if (process.rank >= 0) {
    f.output = WorkerOutput(process.rank);
    return f;
  }
  // srun of every worker: Slurm's reason is in its output (srun's last error,
  // "Unable to allocate resources: ...", "task 1: Killed"; slurmstepd's
  // notice, "... DUE TO PREEMPTION"), its state is squeue's.
  launcher_->FinishOutput(DeadlineAfter(std::chrono::seconds(1)));
  if (const std::string reason = launcher_->ExitReason(); !reason.empty()) f.what += "; " + PrintableTail(reason, 300);
  const std::string srun = ChildProcess::LogTail(SrunLogPath(options_.job_dir));
  if (const std::string state = launcher_->SchedulerState(); !state.empty()) f.what += "; " + state;
  if (!srun.empty()) f.output = "srun:\n" + srun;
  for (int rank = 0; rank < workers(); ++rank) {
    const std::string out = WorkerOutput(rank);
    if (!out.empty()) f.output += (f.output.empty() ? "" : "\n") + out;
  }
  return f;
}

std::string RegionJob::WorkerOutput(int rank) const {
  const std::string tail = ChildProcess::LogTail(log_file(rank));
  return tail.empty() ? "" : "worker " + std::to_string(rank) + ":\n" + tail;
}

void RegionJob::BeginStop(Duration grace, StopMode mode, Duration kill_grace) {
  if (phase_ == Phase::kStopping) {
    if (mode == StopMode::kTerminate && !terminated_) Terminate(grace);
    return;
  }
  phase_ = Phase::kStopping;
  kill_grace_ = kill_grace;
  if (mode == StopMode::kTerminate) {
    Terminate(grace);
  } else {
    terminate_deadline_ = DeadlineAfter(grace);
  }
}

void RegionJob::Terminate(Duration kill_grace) {
  terminated_ = true;
  stop_deadline_ = DeadlineAfter(kill_grace);
  // Workers blocked in a collective cannot act on a STOP message; SIGTERM ends them.
  for (auto& w : workers_) w.child.Signal(SIGTERM);
  for (auto& l : linkems_) l.Signal(SIGTERM);
}

bool RegionJob::FinishStop() {
  if (!terminated_) {
    bool workers_gone = true;
    for (auto& w : workers_) workers_gone = w.child.Poll() && workers_gone;
    if (!workers_gone && std::chrono::steady_clock::now() <= terminate_deadline_) return false;
    Terminate(kill_grace_);  // the workers ended on their own (or their grace ran out)
  }
  const bool late = std::chrono::steady_clock::now() > stop_deadline_;
  bool all_gone = true;
  const auto reap = [&](ChildProcess& p) {
    if (p.Poll()) return;
    if (late) {
      p.Stop(std::chrono::milliseconds(200));
    } else {
      all_gone = false;
    }
  };
  for (auto& w : workers_) reap(w.child);
  for (auto& l : linkems_) reap(l);
  // srun is gone: what Slurm may still run for the launch (srun killed before
  // its tasks ended) is cancelled.
  if (all_gone && launcher_) launcher_->Cancel();
  // What the workers started dies with the job.
  // What left its process group is still in the launch's cgroup: ended too,
  // over as many ticks as it takes (bounded: then it is left to the destructor).
  if (all_gone && cgroup_ && !cgroup_->KillAll() && std::chrono::steady_clock::now() < stop_deadline_ + kill_grace_ * 4) {
    return false;
  }
  return all_gone;
}

void RegionJob::BeginRound(const v1::RoundCommand& start) {
  current_ = start;
  reports_.clear();
  owes_report_since_.resize(static_cast<size_t>(workers()));
  for (auto& since : owes_report_since_) {
    if (!since) since = std::chrono::steady_clock::now();
  }
}

std::optional<RegionJob::Failure> RegionJob::RoundOverdue(Duration limit) const {
  if (phase_ != Phase::kReady) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  std::string hung;
  int first = -1;
  for (size_t i = 0; i < owes_report_since_.size(); ++i) {
    if (!owes_report_since_[i] || now - *owes_report_since_[i] < limit) continue;
    hung += (hung.empty() ? "" : ", ") + std::to_string(i);
    if (first < 0) first = static_cast<int>(i);
  }
  if (first < 0) return std::nullopt;
  return Failure{"job " + config_.job_id + ": worker(s) " + hung + " sent no round report within " +
                     std::to_string(limit.count() / 1000) + " s (hung?)",
                 WorkerOutput(first)};
}

void RegionJob::OnVerdict(const v1::RoundVerdict& verdict) {
  if (verdict.committed() && verdict.round() >= config_.rounds) last_round_committed_ = true;
}

std::optional<v1::RoundReport> RegionJob::OnWorkerReport(int rank, const v1::RoundReport& report) {
  if (rank >= 0 && static_cast<size_t>(rank) < owes_report_since_.size()) owes_report_since_[rank].reset();
  if (!current_ || report.round() != current_->round() || report.epoch() != current_->epoch()) return std::nullopt;
  reports_[rank] = report;
  if (reports_.size() < static_cast<size_t>(workers())) return std::nullopt;
  std::vector<v1::RoundReport> ordered;
  for (auto& [r, rep] : reports_) ordered.push_back(rep);
  auto region_report = AggregateRegionReport(options_.region, ordered);
  EndRound();
  return region_report;
}

}  // namespace longhaul::region_agent
