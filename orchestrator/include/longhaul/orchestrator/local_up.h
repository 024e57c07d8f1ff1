// `longhaul up` / `longhaul down`: a local cluster for your own jobs (like
// `kind create cluster`). `up` starts an orchestrator and N region agents in
// the background, every key generated and all state (SQLite file, keys, logs,
// job folders) under one folder, and prints the environment for the CLI:
//
//   eval "$(longhaul up --regions 3)"
//   longhaul submit job.yaml --watch
//   longhaul down
//
// `down` stops exactly the processes `up` recorded (pid and start time), with
// the workers and links their agents started, and removes the folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace longhaul::orchestrator {

struct UpOptions {
  std::string dir;  // "": ~/.longhaul/up
  uint32_t regions = 3;
  uint32_t workers_per_region = 1;
  double wan_rate_mbit = 0;  // > 0: every region's WAN endpoints behind longhaul-linkem links at this rate
  double wan_delay_ms = 0;   // one way, with a rate
  std::string bin_dir;       // where longhaul-orchestrator / -agent / -worker / -linkem live
  // The programs your jobs may run (worker.command[0]) and the folders they may
  // run in: none given: /usr/bin/python3 (when there) and the current folder.
  std::vector<std::string> allow_commands;
  std::vector<std::string> allow_working_dirs;
};

struct DownOptions {
  std::string dir;    // "": ~/.longhaul/up
  bool keep = false;  // keep the folder (logs, state) after stopping
};

// The folder `up` and `down` use when none is given.
std::string DefaultUpDir();

// Both return a process exit code (0: done), messages on stderr; `up` prints
// `export NAME=VALUE` lines on stdout (also written to DIR/env).
int RunUp(const UpOptions& options);
int RunDown(const DownOptions& options);

}  // namespace longhaul::orchestrator
