#include "longhaul/orchestrator/local_cluster.h"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "child_processes.h"
#include "process_manifest.h"
#include "longhaul/orchestrator/region_netns.h"
#include "longhaul/orchestrator/control_client.h"
#include "longhaul/orchestrator/endpoint_file.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/trainer/markov_chain.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {
namespace {

namespace fs = std::filesystem;

// Keys: one per agent, one for the CLI, one for the orchestrator. The control
// allowlist admits the agents and the CLI. The WAN needs no key of ours: every
// launch of workers gets a key pair of its own from its agent.
Status MakeKeys(const fs::path& dir, const std::vector<LocalRegion>& regions) {
  fs::create_directories(dir / "control-allow");
  auto gen = [&](const std::string& name, bool control) -> Status {
    LONGHAUL_ASSIGN_OR_RETURN(auto keys, wan_transport::GenerateCurveKeyPair());
    LONGHAUL_RETURN_IF_ERROR(wan_transport::WriteKeyPair(dir, name, keys));
    std::error_code ec;  // the allowlist folder holds public keys only
    if (control) fs::copy_file(dir / (name + ".pub"), dir / "control-allow" / (name + ".pub"), ec);
    if (ec) return Internal("cannot write the allowlist entry of " + name + ": " + ec.message());
    return Status::Ok();
  };
  LONGHAUL_RETURN_IF_ERROR(gen("orchestrator", false));
  LONGHAUL_RETURN_IF_ERROR(gen("cli", true));
  // Roles: the CLI key is an admin; each region's key is the agent of that region only.
  std::ofstream roles(dir / "control-allow" / "roles");
  roles << "cli admin\n";  // the local cluster's operator: may also remove regions
  for (const auto& r : regions) {
    LONGHAUL_RETURN_IF_ERROR(gen(r.name, true));
    roles << r.name << " agent " << r.name << "\n";
  }
  roles.close();
  if (!roles) return Internal("cannot write " + (dir / "control-allow" / "roles").string());
  return Status::Ok();
}

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

struct LocalCluster::Impl {
  LocalClusterOptions options;
  std::unique_ptr<RegionNetworks> networks;  // --netns: outlives the processes in it
  ChildProcesses children;
  std::unique_ptr<ControlClient> client;
};

LocalCluster::LocalCluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LocalCluster::~LocalCluster() {
  impl_->client.reset();
  if (detached_) return;  // the processes and their folder belong to `longhaul down` now
  impl_->children.StopAll(std::chrono::seconds(5));
  if (!work_.empty() && !impl_->options.keep_work_dir) {
    std::error_code ec;
    fs::remove_all(work_, ec);
  }
}

Result<std::unique_ptr<LocalCluster>> LocalCluster::Start(const LocalClusterOptions& options) {
  if (options.regions.empty()) return InvalidArgument("a local cluster needs at least one region");
  if (options.netns && options.detached) {
    return InvalidArgument("regions in network namespaces live as long as the command that made them, not detached");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(std::move(impl)));
  LONGHAUL_RETURN_IF_ERROR(cluster->Boot());
  return cluster;
}

void LocalCluster::Say(const std::string& line) const {
  if (impl_->options.say) impl_->options.say(line);
}

Status LocalCluster::Boot() {
  const LocalClusterOptions& o = impl_->options;
  if (o.work_dir.empty()) {
    std::string tmpl = o.work_dir_prefix + "XXXXXX";
    if (!::mkdtemp(tmpl.data())) return Internal("cannot create a temporary directory from " + tmpl);
    work_ = tmpl;
  } else {
    std::error_code ec;
    if (fs::exists(o.work_dir, ec) && !fs::is_empty(o.work_dir, ec))
      return FailedPrecondition(o.work_dir + " is not empty: a local cluster needs a folder of its own");
    fs::create_directories(o.work_dir, ec);
    if (ec) return Internal("cannot create " + o.work_dir + ": " + ec.message());
    work_ = fs::absolute(o.work_dir);
  }
  fs::create_directories(log_dir());
  LONGHAUL_RETURN_IF_ERROR(MakeKeys(work_ / "keys", o.regions));
  const fs::path keys = work_ / "keys";
  auto bin = [&](const std::string& name) { return (fs::path(o.bin_dir) / name).string(); };
  const bool detached = o.detached;
  std::string control_host = "127.0.0.1";
  if (o.netns) {
    LONGHAUL_ASSIGN_OR_RETURN(impl_->networks, RegionNetworks::Create(o.regions));
    control_host = impl_->networks->host_address();
    Say("regions in network namespaces " + impl_->networks->netns(0) + "..., orchestrator on the bridge " + control_host);
  }
  auto orch = impl_->children.Start(
      "orchestrator",
      {bin("longhaul-orchestrator"), "--bind", "tcp://" + control_host + ":0", "--init", "--state", state_file().string(), "--key",
       (keys / "orchestrator.key").string(), "--allowlist", (keys / "control-allow").string(), "--metrics",
       "127.0.0.1:0", "--endpoint-file", (work_ / "orchestrator.endpoint").string(), "--checkpoint-dir",
       (work_ / "checkpoints").string(), "--heartbeat-ms", "250", "--heartbeat-misses", "8", "--round-timeout-s",
       std::to_string(o.round_timeout.count()), "--collective-timeout-s", std::to_string(o.collective_timeout.count())},
      (log_dir() / "orchestrator.log").string(), detached);
  if (!orch.ok()) return orch.status();
  LONGHAUL_ASSIGN_OR_RETURN(auto ep, WaitForEndpointFile(work_ / "orchestrator.endpoint", std::chrono::seconds(15)));
  metrics_url_ = ep.metrics;
  control_endpoint_ = ep.control;
  Say("orchestrator on " + ep.control + ", metrics " + ep.metrics);
  for (size_t i = 0; i < o.regions.size(); ++i) {
    const LocalRegion& r = o.regions[i];
    // Its own host (--netns): its address for the WAN and /metrics, the rest of its namespace's loopback.
    const std::string host = o.netns ? impl_->networks->address(i) : "127.0.0.1";
    std::vector<std::string> argv = {
        bin("longhaul-agent"), "--region", r.name, "--orchestrator", ep.control, "--orchestrator-public-key",
        (keys / "orchestrator.pub").string(), "--key", (keys / (r.name + ".key")).string(), "--workers",
        std::to_string(o.workers_per_region), "--data-host", host, "--work-dir", (work_ / r.name).string(),
        "--metrics", host + ":0", "--bin-dir", o.bin_dir,
        "--collective-timeout-s", std::to_string(o.collective_timeout.count())};
    if (o.validation_batches > 0) argv.insert(argv.end(), {"--validation-batches", std::to_string(o.validation_batches)});
    if (r.compute_throttle_percent != 100)
      argv.insert(argv.end(), {"--compute-throttle-percent", std::to_string(r.compute_throttle_percent)});
    for (const auto& c : o.allow_commands) argv.insert(argv.end(), {"--allow-command", c});
    for (const auto& d : o.allow_working_dirs) argv.insert(argv.end(), {"--allow-working-dir", d});
    if (o.wan_emulation) {
      // In a namespace tbf shapes the rate; longhaul-linkem adds only the delay.
      for (const auto& flag : std::vector<std::string>{"--wan-rate-mbit", o.netns ? "0" : Num(r.rate_mbit),
                                                       "--wan-delay-ms", Num(r.delay_ms), "--wan-jitter-ms",
                                                       Num(r.jitter_ms)})
        argv.push_back(flag);
    }
    if (o.netns) argv = impl_->networks->Inside(i, argv);
    auto agent = impl_->children.Start("agent " + r.name, argv, (log_dir() / (r.name + ".log")).string(), detached);
    if (!agent.ok()) return agent.status();
    Say("agent " + r.name + (o.netns ? " in " + impl_->networks->netns(i) + " at " + host : "") +
        (o.wan_emulation ? ": WAN " + Num(r.rate_mbit) + " Mbit/s" + (o.netns ? " (tbf), " : ", ") + Num(r.delay_ms) +
                               " ms delay, " + Num(r.jitter_ms) + " ms jitter"
                         : (o.netns ? ": no WAN emulation" : ": plain loopback")));
  }
  ControlClientOptions co;
  co.endpoint = ep.control;
  LONGHAUL_ASSIGN_OR_RETURN(co.own_keys, wan_transport::LoadKeyPair(keys / "cli.key"));
  co.server_public_key = ep.public_key;
  LONGHAUL_ASSIGN_OR_RETURN(impl_->client, ControlClient::Connect(co));
  return WaitForRegions(std::chrono::seconds(60));
}

Status LocalCluster::Detach() {
  if (!impl_->options.detached) return FailedPrecondition("the local cluster was not started detached");
  LONGHAUL_RETURN_IF_ERROR(CheckAlive());
  std::vector<ManifestEntry> entries;
  std::string gone;
  for (const auto& [name, pid] : impl_->children.Release()) {
    auto e = EntryFor(pid, name);
    if (e) {
      entries.push_back(std::move(*e));
    } else {
      gone = name;
    }
  }
  // Agents first: `longhaul down` stops them (and their workers) before the orchestrator.
  std::stable_partition(entries.begin(), entries.end(),
                        [](const ManifestEntry& e) { return e.name.rfind("agent ", 0) == 0; });
  Status written = gone.empty() ? WriteManifest(manifest_file(), entries)
                                : Unavailable(gone + " exited at start-up (see its log in " + log_dir().string() + ")");
  if (!written.ok()) {
    StopManifest(entries, std::chrono::seconds(5));
    return written;
  }
  detached_ = true;
  return Status::Ok();
}

Status LocalCluster::CheckAlive() {
  if (impl_->options.interrupted && impl_->options.interrupted->load())
    return Cancelled("interrupted; stopping every process of the local cluster");
  const std::string gone = impl_->children.Exited();
  if (!gone.empty()) return Unavailable(gone + " (see its log in " + log_dir().string() + ")");
  return Status::Ok();
}

Status LocalCluster::WaitForRegions(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const size_t want = impl_->options.regions.size();
  while (std::chrono::steady_clock::now() < deadline) {
    LONGHAUL_RETURN_IF_ERROR(CheckAlive());
    v1::ControlMessage req;
    req.mutable_list_regions();
    LONGHAUL_ASSIGN_OR_RETURN(auto reply, impl_->client->Call(req));
    size_t up = 0;
    for (const auto& r : reply.list_regions_reply().regions()) up += r.state() == "up" ? 1 : 0;
    if (up >= want) {
      Say(std::to_string(up) + " regions up");
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return DeadlineExceeded("the region agents did not register within " + std::to_string(timeout.count()) + " s");
}

Result<std::string> LocalCluster::Submit(const v1::JobSpec& spec) {
  v1::ControlMessage req;
  *req.mutable_submit_job()->mutable_spec() = spec;
  LONGHAUL_ASSIGN_OR_RETURN(auto reply, impl_->client->Call(req));
  return reply.submit_job_reply().job_id();
}

Result<v1::JobStatus> LocalCluster::JobStatus(const std::string& job_id) {
  v1::ControlMessage req;
  req.mutable_job_status_request()->set_job_id(job_id);
  LONGHAUL_ASSIGN_OR_RETURN(auto reply, impl_->client->Call(req));
  return reply.job_status();
}

Result<v1::ListRegionsReply> LocalCluster::Regions() {
  v1::ControlMessage req;
  req.mutable_list_regions();
  LONGHAUL_ASSIGN_OR_RETURN(auto reply, impl_->client->Call(req));
  return reply.list_regions_reply();
}

Result<v1::JobStatus> LocalCluster::WaitForJob(const std::string& job_id, std::chrono::seconds timeout,
                                               std::chrono::milliseconds poll,
                                               const std::function<void(const v1::JobStatus&)>& on_status) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    LONGHAUL_RETURN_IF_ERROR(CheckAlive());
    LONGHAUL_ASSIGN_OR_RETURN(v1::JobStatus status, JobStatus(job_id));
    if (on_status) on_status(status);
    if (IsTerminalJobState(status.state())) return status;
    if (std::chrono::steady_clock::now() > deadline)
      return DeadlineExceeded(job_id + " did not finish within " + std::to_string(timeout.count()) + " s");
    std::this_thread::sleep_for(poll);
  }
}

double SyntheticLossFloor(const v1::JobSpec& spec) {
  if (!spec.data().has_synthetic()) return 0;
  const auto& d = spec.data().synthetic();
  auto chain = trainer::MarkovChain::Random(d.seed(), d.order(), d.branching());
  if (!chain.ok()) return 0;
  auto h = chain->EntropyRate();
  return h.ok() ? *h : 0;
}

}  // namespace longhaul::orchestrator
