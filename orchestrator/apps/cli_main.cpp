// longhaul: command-line client
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"longhaul - command-line client"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
