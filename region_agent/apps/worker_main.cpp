// longhaul-worker: one training worker of a region
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"longhaul-worker - one training worker of a region"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
