// longhaul-linkem: userspace WAN link emulator (rate, delay, jitter).
// Prints exactly one line "listening on HOST:PORT" once ready; SIGINT/SIGTERM stop it.
// With --control-file it watches that file and reshapes the running link to
// what it says ("rate-mbit=12.5 delay-ms=80"; link_emulator.h ParseLinkControl).
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sstream>
#include <thread>

#include "longhaul/wan_transport/link_emulator.h"

namespace {

namespace wt = longhaul::wan_transport;

// Applies the control file whenever it changes (checked every 100 ms); a file
// it cannot use is logged, naming the problem, and the link keeps its shape.
void WatchControlFile(const std::string& path, wt::LinkEmulator& emu, const std::atomic<bool>& stop) {
  struct stat last {};
  while (!stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // not written yet
    if (st.st_ino == last.st_ino && st.st_size == last.st_size && st.st_mtim.tv_sec == last.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == last.st_mtim.tv_nsec) {
      continue;
    }
    last = st;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto shape = wt::ParseLinkControl(text.str(), emu.shape());
    longhaul::Status applied = shape.ok() ? emu.Reshape(*shape) : shape.status();
    if (applied.ok()) spdlog::info("linkem: control file {}: now {}", path, shape->ToString());
    else spdlog::error("linkem: control file {}: {}; keeping {}", path, applied.message(), emu.shape().ToString());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"longhaul-linkem - userspace WAN link emulator (rate, delay, jitter)"};
  std::string listen = "127.0.0.1:0", forward;
  double rate_mbit = 0, delay_ms = 0, jitter_ms = 0;
  bool quiet = false;
  std::string control_file;
  app.add_option("--listen", listen, "HOST:PORT to accept on (port 0 = any free port)");
  app.add_option("--forward", forward, "HOST:PORT every connection is relayed to")->required();
  app.add_option("--rate-mbit", rate_mbit, "link rate in Mbit/s per direction, whole link (0 = unlimited)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--delay-ms", delay_ms, "one-way delay in ms, applied in each direction")->check(CLI::Range(0.0, 1e6));
  app.add_option("--jitter-ms", jitter_ms, "+- uniform jitter in ms (never reorders a stream; <= delay)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--quiet", quiet, "log errors only");
  app.add_option("--control-file", control_file,
                 "watch this file and reshape the running link to what it says, e.g. 'rate-mbit=12.5 delay-ms=80'");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "longhaul-linkem: " << e.what() << "\n";
    return 2;
  }
  // Logs go to stderr: stdout is the one "listening on" line a launcher reads
  // (and may read no further: a full pipe would stall the link).
  spdlog::set_default_logger(spdlog::stderr_color_mt("linkem"));
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
  std::atomic<bool> stop_watching{false};
  std::thread watcher;
  if (!control_file.empty()) watcher = std::thread([&] { WatchControlFile(control_file, **emu, stop_watching); });
  int sig = 0;
  sigwait(&stop_signals, &sig);
  stop_watching = true;
  if (watcher.joinable()) watcher.join();
  if (!quiet) spdlog::info("linkem: signal {}, stopping after {} connections", sig, (*emu)->connections_accepted());
  emu->reset();
  return 0;
}
