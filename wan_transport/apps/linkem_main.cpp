// longhaul-linkem: userspace WAN link emulator (rate, delay, jitter)
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"longhaul-linkem - userspace WAN link emulator (rate, delay, jitter)"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
