#include "e2e_run.h"

#include <algorithm>
#include <cstdio>

#include "longhaul/orchestrator/job_spec.h"

namespace longhaul::bench {

Result<E2eRun> RunJob(orchestrator::LocalCluster& cluster, const v1::JobSpec& spec, std::chrono::seconds timeout,
                      std::chrono::milliseconds poll) {
  LONGHAUL_ASSIGN_OR_RETURN(const std::string id, cluster.Submit(spec));
  uint32_t shown = 0;
  auto progress = [&](const v1::JobStatus& s) {
    if (s.round() == shown) return;
    shown = s.round();
    std::fprintf(stderr, "\r  %s %s: round %u/%u val loss %.4f   ", id.c_str(), spec.name().c_str(), s.round(),
                 s.total_rounds(), s.val_loss());
  };
  LONGHAUL_ASSIGN_OR_RETURN(v1::JobStatus status,
                            cluster.WaitForJob(id, timeout, poll, progress));
  std::fprintf(stderr, "\n");
  if (status.state() != "succeeded")
    return Aborted(id + " (" + spec.name() + ") ended " + status.state() + ": " + status.reason());
  LONGHAUL_ASSIGN_OR_RETURN(auto store, orchestrator::StateStore::Open(cluster.state_file()));
  LONGHAUL_ASSIGN_OR_RETURN(auto rounds, store->LoadRounds(id));
  if (status.loss_floor() <= 0) status.set_loss_floor(orchestrator::SyntheticLossFloor(spec));
  return E2eRun{std::move(status), std::move(rounds)};
}

orchestrator::LocalClusterOptions BenchClusterOptions(size_t regions, const std::string& name,
                                                      const std::string& bin_dir) {
  orchestrator::LocalClusterOptions co;
  co.regions = BenchRegions(regions);
  co.bin_dir = bin_dir;
  co.work_dir_prefix = "/tmp/longhaul-bench-" + name + "-";
  co.round_timeout = std::chrono::seconds(300);
  co.say = [](const std::string& line) { std::fprintf(stderr, "cluster: %s\n", line.c_str()); };
  return co;
}

void SetRegions(v1::JobSpec& spec, const std::vector<orchestrator::LocalRegion>& regions) {
  spec.clear_regions();
  for (const auto& r : regions) spec.add_regions(r.name);
  spec.set_region_count(static_cast<uint32_t>(regions.size()));
  spec.set_min_regions(static_cast<uint32_t>(regions.size()));
}

v1::JobSpec BuiltinJobSpec(const std::string& name, const std::string& preset,
                           const std::vector<orchestrator::LocalRegion>& regions) {
  v1::JobSpec s = orchestrator::DefaultJobSpec();
  s.set_name(name);
  s.set_model_preset(preset);
  s.mutable_worker()->mutable_builtin()->set_preset(preset);
  SetRegions(s, regions);
  return s;
}

std::vector<orchestrator::LocalRegion> BenchRegions(size_t n) {
  std::vector<orchestrator::LocalRegion> all = {
      {"eu-west", 100, 20, 1}, {"us-east", 50, 40, 2}, {"ap-south", 200, 60, 3}, {"sa-east", 100, 30, 2}};
  all.resize(std::min(n, all.size()));
  return all;
}

}  // namespace longhaul::bench
