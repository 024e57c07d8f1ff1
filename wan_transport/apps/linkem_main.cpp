// longhaul-linkem: userspace WAN link emulator (rate, delay, jitter).
// Prints exactly one line "listening on HOST:PORT" once ready; SIGINT/SIGTERM stop it.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <spdlog/spdlog.h>

#include "longhaul/wan_transport/link_emulator.h"

int main(int argc, char** argv) {
  CLI::App app{"longhaul-linkem - userspace WAN link emulator (rate, delay, jitter)"};
  std::string listen = "127.0.0.1:0", forward;
  double rate_mbit = 0, delay_ms = 0, jitter_ms = 0;
  bool quiet = false;
  app.add_option("--listen", listen, "HOST:PORT to accept on (port 0 = any free port)");
  app.add_option("--forward", forward, "HOST:PORT every connection is relayed to")->required();
  app.add_option("--rate-mbit", rate_mbit, "link rate in Mbit/s per direction, whole link (0 = unlimited)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--delay-ms", delay_ms, "one-way delay in ms, applied in each direction")->check(CLI::Range(0.0, 1e6));
  app.add_option("--jitter-ms", jitter_ms, "+- uniform jitter in ms (never reorders a stream; <= delay)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--quiet", quiet, "log errors only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "longhaul-linkem: " << e.what() << "\n";
    return 2;
  }
  spdlog::set_level(quiet ? spdlog::level::err : spdlog::level::info);

  // Block the stop signals before any thread starts, then wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  longhaul::wan_transport::LinkEmulatorOptions opt;
  opt.listen = listen;
  opt.forward = forward;
  opt.rate_bytes_per_second = rate_mbit * 1e6 / 8;
  opt.delay = std::chrono::microseconds(static_cast<long>(delay_ms * 1000));
  opt.jitter = std::chrono::microseconds(static_cast<long>(jitter_ms * 1000));
  auto emu = longhaul::wan_transport::LinkEmulator::Start(opt);
  if (!emu.ok()) {
    std::cerr << "longhaul-linkem: " << emu.status().ToString() << "\n";
    return emu.status().code() == longhaul::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::printf("listening on %s\n", (*emu)->listen_address().c_str());
  std::fflush(stdout);
  if (!quiet) {
    spdlog::info("linkem: {} -> {} rate {} Mbit/s delay {} ms jitter {} ms", (*emu)->listen_address(), forward, rate_mbit,
                 delay_ms, jitter_ms);
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (!quiet) spdlog::info("linkem: signal {}, stopping after {} connections", sig, (*emu)->connections_accepted());
  emu->reset();
  return 0;
}
