#include "longhaul/orchestrator/local_up.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "longhaul/orchestrator/local_cluster.h"
#include "process_manifest.h"

namespace longhaul::orchestrator {
namespace {

namespace fs = std::filesystem;

// Region names by index: the demo's three, then more continents.
constexpr std::array<const char*, 8> kRegionNames = {"eu-west",   "us-east",    "ap-south",   "sa-east",
                                                     "af-south",  "me-central", "ca-central", "ap-northeast"};

int Fail(const std::string& what) {
  std::cerr << "longhaul: " << what << "\n";
  return 1;
}

std::string Dir(const std::string& given) { return given.empty() ? DefaultUpDir() : given; }

}  // namespace

std::string DefaultUpDir() {
  const char* home = std::getenv("HOME");
  return home != nullptr && *home != '\0' ? (fs::path(home) / ".longhaul" / "up").string() : "";
}

int RunUp(const UpOptions& o) {
  const std::string dir = Dir(o.dir);
  if (dir.empty()) return Fail("HOME is not set: give the cluster's folder with --dir");
  if (o.regions == 0 || o.regions > kRegionNames.size())
    return Fail("--regions must be in 1.." + std::to_string(kRegionNames.size()) + ", got " + std::to_string(o.regions));
  LocalClusterOptions co;
  co.work_dir = dir;
  co.detached = true;
  co.keep_work_dir = true;
  co.bin_dir = o.bin_dir;
  co.workers_per_region = o.workers_per_region;
  co.wan_emulation = o.wan_rate_mbit > 0;
  for (uint32_t i = 0; i < o.regions; ++i) co.regions.push_back({kRegionNames[i], o.wan_rate_mbit, o.wan_delay_ms, 0});
  co.say = [](const std::string& line) { std::cerr << "longhaul up: " << line << "\n"; };
  co.allow_commands = o.allow_commands;
  co.allow_working_dirs = o.allow_working_dirs;
  if (co.allow_commands.empty() && ::access("/usr/bin/python3", X_OK) == 0) co.allow_commands.push_back("/usr/bin/python3");
  if (co.allow_working_dirs.empty()) co.allow_working_dirs.push_back(fs::current_path().string());

  const fs::path manifest = fs::path(dir) / "up.processes";
  if (auto entries = ReadManifest(manifest); entries.ok()) {
    for (const auto& e : *entries)
      if (IsRunning(e)) return Fail("a local cluster is already up in " + dir + " (stop it with: longhaul down --dir " + dir + ")");
    std::error_code ec;
    fs::remove_all(dir, ec);  // a cluster that is no longer running: its folder is stale
  }
  auto cluster = LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    return Fail("up: " + cluster.status().message());
  }
  if (Status s = (*cluster)->Detach(); !s.ok()) {
    cluster->reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
    return Fail("up: " + s.message());
  }
  const fs::path keys = fs::path(dir) / "keys";
  const std::string env = "export LONGHAUL_ORCHESTRATOR=" + (*cluster)->control_endpoint() + "\n" +
                          "export LONGHAUL_KEY=" + (keys / "cli.key").string() + "\n" +
                          "export LONGHAUL_SERVER_KEY=" + (keys / "orchestrator.pub").string() + "\n";
  std::ofstream(fs::path(dir) / "env") << env;
  std::cout << env << std::flush;
  std::cerr << "longhaul up: jobs may run";
  for (const auto& c : co.allow_commands) std::cerr << " " << c;
  std::cerr << (co.allow_commands.empty() ? " the built-in trainer only" : "") << " in their job folder";
  for (const auto& d : co.allow_working_dirs) std::cerr << " or under " << d;
  std::cerr << " (--allow-command, --allow-working-dir)\n";
  std::cerr << "longhaul up: " << o.regions << " region(s) up in " << dir
            << "; metrics " << (*cluster)->metrics_url() << "; logs in " << (*cluster)->log_dir().string()
            << "\nlonghaul up: use the cluster with: eval \"$(cat " << (fs::path(dir) / "env").string()
            << ")\"; stop it with: longhaul down" << (o.dir.empty() ? "" : " --dir " + dir) << "\n";
  return 0;
}

int RunDown(const DownOptions& o) {
  const std::string dir = Dir(o.dir);
  if (dir.empty()) return Fail("HOME is not set: give the cluster's folder with --dir");
  auto entries = ReadManifest(fs::path(dir) / "up.processes");
  if (!entries.ok()) {
    return Fail(entries.status().code() == StatusCode::kNotFound ? "no local cluster in " + dir + " (nothing to stop)"
                                                                 : "down: " + entries.status().message());
  }
  int running = 0;
  for (const auto& e : *entries) running += IsRunning(e) ? 1 : 0;
  const int killed = StopManifest(*entries, std::chrono::seconds(10));
  if (!o.keep) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) return Fail("down: stopped the cluster but cannot remove " + dir + ": " + ec.message());
  }
  std::cerr << "longhaul down: stopped " << running << " process(es) of the local cluster in " << dir
            << (killed > 0 ? " (" + std::to_string(killed) + " needed SIGKILL)" : "")
            << (o.keep ? "; kept the folder" : "; removed the folder") << "\n";
  return 0;
}

}  // namespace longhaul::orchestrator
