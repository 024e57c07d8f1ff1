// longhaul-agent: per-region daemon
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"longhaul-agent - per-region daemon"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
