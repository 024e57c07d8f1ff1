// longhaul-worker: one training worker of a region, launched by longhaul-agent.
#include <signal.h>

#include <CLI/CLI.hpp>

#include "longhaul/region_agent/worker.h"

int main(int argc, char** argv) {
  CLI::App app{"longhaul-worker - one training worker of a region (started by longhaul-agent)"};
  longhaul::region_agent::WorkerOptions o;
  std::string assignment, store_dir;
  int collective_ms = 60000;
  app.add_option("--agent", o.agent_endpoint, "agent's worker socket, tcp://127.0.0.1:PORT")->required();
  app.add_option("--assignment", assignment, "JobAssignment file (binary protobuf) written by the agent")->required();
  app.add_option("--rank", o.rank, "this worker's rank in the region")->required();
  app.add_option("--region", o.region, "region name")->required();
  app.add_option("--store-dir", store_dir, "Gloo FileStore folder for the intra-region rendezvous")->required();
  app.add_option("--wan-host", o.wan_host, "host the WAN endpoint binds on")->default_val("127.0.0.1");
  app.add_flag("--insecure", o.insecure, "no CURVE on the WAN");
  app.add_option("--key", o.key_file, "region key pair (.key)");
  app.add_option("--allowlist", o.allowlist, "WAN peers admitted (file or folder of .pub)");
  app.add_option("--collective-timeout-ms", collective_ms, "deadline of one collective");
  app.add_option("--validation-batches", o.validation_batches, "held-out batches for val_loss");
  CLI11_PARSE(app, argc, argv);
  o.assignment_file = assignment;
  o.store_dir = store_dir;
  o.collective_timeout = std::chrono::milliseconds(collective_ms);
  signal(SIGPIPE, SIG_IGN);
  return longhaul::region_agent::RunWorker(o);
}
