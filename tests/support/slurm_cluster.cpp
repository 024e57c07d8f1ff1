#include "support/slurm_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

namespace longhaul::testing {
namespace {

bool Executable(const char* path) { return ::access(path, X_OK) == 0; }

// Polls `done` (a cluster query) every 100 ms until it holds or `limit` passes.
template <typename F>
bool WaitUntil(F done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// A process a Slurm job step started: Slurm puts SLURM_JOB_ID in its environment.
bool RunsForASlurmJob(const ProcessEntry& p) {
  std::ifstream in(p.dir / "environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.starts_with("SLURM_JOB_ID=")) return true;
  return false;
}

}  // namespace

std::string SlurmCluster::Unavailable() {
  if (::geteuid() != 0) return "a Slurm cluster for tests needs root (slurmd starts job steps as their users)";
  for (const char* p : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun"}) {
    if (!Executable(p)) return std::string(p) + " is missing: deploy/install-deps.sh installs slurm-wlm and munge";
  }
  return "";
}

Result<std::unique_ptr<SlurmCluster>> SlurmCluster::Start(const std::filesystem::path& dir, int cpus,
                                                          std::vector<SlurmNode> nodes,
                                                          const std::string& controller_address) {
  if (const std::string why = Unavailable(); !why.empty()) return FailedPrecondition(why);
  std::unique_ptr<SlurmCluster> c(new SlurmCluster());
  c->dir_ = dir;
  std::error_code ec;
  for (const char* sub : {"munge", "state", "spool"}) std::filesystem::create_directories(dir / sub, ec);
  // The munge socket's folder must be searchable by every user that runs srun.
  std::filesystem::permissions(dir, std::filesystem::perms(0755), ec);
  std::filesystem::permissions(dir / "munge", std::filesystem::perms(0755), ec);
  {
    std::ofstream key(dir / "munge.key", std::ios::binary);
    std::random_device rd;
    for (int i = 0; i < 128; ++i) key.put(static_cast<char>(rd()));
  }
  std::filesystem::permissions(dir / "munge.key", std::filesystem::perms(0600), ec);
  const std::string sock = (dir / "munge" / "socket").string();
  auto munged = Subprocess::Spawn({"/usr/sbin/munged", "--foreground", "--force", "--socket=" + sock,
                                   "--key-file=" + (dir / "munge.key").string(), "--log-file=" + (dir / "munged.log").string(),
                                   "--pid-file=" + (dir / "munged.pid").string(), "--seed-file=" + (dir / "munged.seed").string()},
                                  {.log_path = (dir / "munged.out").string()});
  if (!munged.ok()) return munged.status();
  c->munged_ = std::move(*munged);
  if (!WaitUntil([&] { return std::filesystem::exists(sock); }, std::chrono::seconds(10))) {
    return longhaul::Unavailable("munged did not create its socket within 10 s");
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  if (nodes.empty()) nodes.push_back({host, "127.0.0.1", ""});
  const std::string d = dir.string();
  c->conf_ = dir / "slurm.conf";
  {
    std::ofstream conf(c->conf_);
    conf << "ClusterName=longhaul-test\n"
         << "SlurmctldHost=" << host << "(" << controller_address << ")\n"
         << "SlurmctldPort=" << FreeLoopbackPort() << "\n"
         << "SlurmdPort=" << FreeLoopbackPort() << "\n"
         << "AuthType=auth/munge\nCredType=cred/munge\n"
         << "AuthInfo=socket=" << sock << "\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
         << "SlurmUser=root\nSlurmdUser=root\n"
         << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool/%n\n"
         << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd-%n.pid\n"
         << "SlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd-%n.log\n"
         << "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
         << "SlurmdParameters=config_overrides\nReturnToService=2\nMpiDefault=none\n"
         << "EnforcePartLimits=ALL\nMinJobAge=300\nKillWait=2\n"
         << "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n"
         << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1\n"
         << "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2\n";
    for (const auto& n : nodes) {
      conf << "NodeName=" << n.name << " NodeAddr=" << n.address << " CPUs=" << cpus << " State=UNKNOWN\n";
    }
  }
  ::setenv("SLURM_CONF", c->conf_.c_str(), 1);
  auto ctld = Subprocess::Spawn({"/usr/sbin/slurmctld", "-D", "-i", "-f", c->conf_.string()},
                                {.log_path = (dir / "slurmctld.out").string()});
  if (!ctld.ok()) return ctld.status();
  c->slurmctld_ = std::move(*ctld);
  for (const auto& n : nodes) {
    std::filesystem::create_directories(dir / "spool" / n.name, ec);
    std::vector<std::string> argv = {"/usr/sbin/slurmd", "-D", "-N", n.name, "-f", c->conf_.string()};
    // nsenter, not `ip netns exec`: that mounts a /sys of its own without the
    // cgroup tree slurmd needs; only the network is the node's own.
    if (!n.private_dirs.empty()) {
      std::string mounts;
      for (const auto& p : n.private_dirs) mounts += "mount -t tmpfs longhaul-node '" + p.string() + "' && ";
      argv.insert(argv.begin(), {"unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                                 mounts + "exec \"$@\"", "sh"});
    }
    if (!n.netns.empty()) argv.insert(argv.begin(), {"nsenter", "--net=/run/netns/" + n.netns});
    auto slurmd = Subprocess::Spawn(argv, {.log_path = (dir / ("slurmd-" + n.name + ".out")).string()});
    if (!slurmd.ok()) return slurmd.status();
    c->slurmds_.push_back(std::move(*slurmd));
  }
  std::string state;
  if (!WaitUntil([&] {
        state.clear();  // every node idle: one line for the partition's one state
        return c->Run("sinfo --noheader --format=%T", &state) == 0 && state == "idle\n";
      }, std::chrono::seconds(30))) {
    return longhaul::Unavailable("the test Slurm cluster's node is not idle within 30 s (sinfo: " + state + "); logs in " + d);
  }
  return c;
}

int SlurmCluster::Run(const std::string& shell_command, std::string* output) const {
  return RunCommand("SLURM_CONF=" + conf_.string() + " " + shell_command, output, std::chrono::seconds(20));
}

std::string SlurmCluster::JobState(const std::string& job_name) const {
  std::string out;
  if (Run("squeue --noheader --states=all --name=" + job_name + " --format='%i %T'", &out) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

SlurmCluster::~SlurmCluster() {
  if (slurmctld_.Running()) {
    std::string out;
    Run("scancel --quiet --partition=debug,urgent", &out);
    WaitUntil([&] {
      std::string jobs;
      return Run("squeue --noheader --format=%i", &jobs) == 0 && jobs.empty();
    }, std::chrono::seconds(30));
  }
  for (auto& slurmd : slurmds_) slurmd.Stop(SIGTERM, std::chrono::seconds(10));
  slurmctld_.Stop(SIGTERM, std::chrono::seconds(10));
  munged_.Stop(SIGTERM, std::chrono::seconds(10));
  // A job step's slurmstepd outlives slurmd; this process is a subreaper, so
  // what is left of it is ours to end and reap, with the step's own processes
  // (a cancelled batch job's `sleep` could outlive its slurmstepd): those are
  // ours once their slurmstepd is gone.
  for (const pid_t pid : ChildrenNamed(::getpid(), "slurmstepd")) {
    const std::vector<pid_t> tasks = Descendants(pid);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    for (const pid_t task : tasks) {
      ::kill(task, SIGKILL);
      ::waitpid(task, nullptr, 0);  // ECHILD for one its own parent reaped first
    }
  }
  // A step's process whose slurmstepd had already gone was handed to this
  // process (the subreaper) then.
  for (const auto& p : ListProcesses()) {
    if (p.ppid != ::getpid() || !RunsForASlurmJob(p)) continue;
    ::kill(p.pid, SIGKILL);
    ::waitpid(p.pid, nullptr, 0);
  }
  ::unsetenv("SLURM_CONF");
}

}  // namespace longhaul::testing
