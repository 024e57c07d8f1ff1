// longhaul-worker: one built-in-trainer worker of a region, launched by
// longhaul-agent. Everything it needs comes from the environment the agent sets
// (longhaul/session/session_options.h lists the variables).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "longhaul/worker/builtin_worker.h"

int main(int argc, char** argv) {
  CLI::App app{"longhaul-worker - one built-in trainer worker of a region, started by longhaul-agent.\n"
               "It reads its job and agent from the LONGHAUL_* environment variables the agent sets."};
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  auto options = longhaul::session::SessionOptionsFromEnvironment();
  if (!options.ok()) {
    std::cerr << "longhaul-worker: " << options.status().ToString() << "\n";
    return 2;
  }
  return longhaul::worker::RunBuiltinWorker(*options);
}
