// Jobs whose workers are the user's own program (a Python script over
// longhaul.torch) for the SDK benchmarks, and the small statistics both of
// them print. The interpreter and the scripts default to the ones this build
// was configured with (CMake passes their paths in).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "longhaul/orchestrator/local_cluster.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::bench {

struct CommandWorkerOptions {
  std::vector<std::string> argv;           // argv[0]: the interpreter (absolute path)
  std::map<std::string, std::string> env;  // OMP_NUM_THREADS defaults to 1
  std::string working_dir;                 // "" = the job's folder
};

// Makes `spec` run the command in every region instead of the built-in
// trainer (the preset fields are cleared: the orchestrator refuses both).
void SetCommandWorker(v1::JobSpec& spec, const CommandWorkerOptions& worker);

// Median of `v` (0 when empty); the upper middle for even sizes.
double Median(std::vector<double> v);

}  // namespace longhaul::bench
