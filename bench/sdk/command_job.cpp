#include "command_job.h"

#include <algorithm>

namespace longhaul::bench {

// GCC 12 at -O3 reports a spurious -Wrestrict inside protobuf's map insert here
// (as in tests/sdk/sdk_e2e_test.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
void SetCommandWorker(v1::JobSpec& spec, const CommandWorkerOptions& worker) {
  spec.clear_model_preset();
  spec.clear_worker();
  auto* cmd = spec.mutable_worker()->mutable_command();
  for (const auto& a : worker.argv) *cmd->add_argv() = a;
  (*cmd->mutable_env())["OMP_NUM_THREADS"] = "1";
  for (const auto& [name, value] : worker.env) (*cmd->mutable_env())[name] = value;
  cmd->set_working_dir(worker.working_dir);
}
#pragma GCC diagnostic pop

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace longhaul::bench
