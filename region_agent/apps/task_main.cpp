// longhaul-task: how the agent's slurm launcher starts each worker. srun runs
// `longhaul-task -- PROGRAM ARGS...` as every task of the launch's step; this
// sets the worker's rank, torchrun's variables and its own hello token from the
// task's Slurm variables (SlurmTaskEnvironment), drops the other ranks'
// tokens, agrees torch.distributed's MASTER_ADDR and MASTER_PORT with the
// step's other tasks through the agent's store (rank 0's host: the tasks may
// run on different nodes; AgreeTorchRendezvous), and executes the worker in its place.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "longhaul/region_agent/worker_launcher.h"
#include "longhaul/session/torch_rendezvous.h"

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "--") != 0) {
    std::fprintf(stderr, "usage: longhaul-task -- PROGRAM [ARGS...] (run by srun for a longhaul agent)\n");
    return 2;
  }
  auto env = longhaul::region_agent::SlurmTaskEnvironment([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
  if (!env.ok()) {
    std::fprintf(stderr, "longhaul-task: %s\n", env.status().message().c_str());
    return 2;
  }
  for (const auto& [name, value] : *env) ::setenv(name.c_str(), value.c_str(), 1);
  ::unsetenv(longhaul::region_agent::kWorkerTokensVariable);
  auto options = longhaul::session::SessionOptionsFromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "longhaul-task: %s\n", options.status().message().c_str());
    return 2;
  }
  auto torch = longhaul::session::AgreeTorchRendezvous(*options);
  if (!torch.ok()) {
    std::fprintf(stderr, "longhaul-task: %s\n", torch.status().message().c_str());
    return 2;
  }
  ::setenv("MASTER_ADDR", torch->master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(torch->master_port).c_str(), 1);
  if (!torch->gloo_interface.empty()) {
    ::setenv("GLOO_SOCKET_IFNAME", torch->gloo_interface.c_str(), 0);  // the job's own choice stays
  }
  ::execvp(argv[2], argv + 2);
  std::fprintf(stderr, "longhaul-task: cannot execute %s: %s\n", argv[2], std::strerror(errno));
  return 127;
}
