// longhaul-orchestrator: control plane
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"longhaul-orchestrator - control plane"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
