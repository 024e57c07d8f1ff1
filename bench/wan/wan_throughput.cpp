// bench_wan_throughput: goodput of the WAN data plane (CURVE on, K connections)
// next to iperf3 with the same stream count over the same path, as ratios:
//   (a) loopback (also with encryption off: the cost of CURVE)
//   (b) longhaul-linkem at 100 Mbit/s and 1 Gbit/s with 20 and 80 ms RTT
//   (c) a veth pair between two network namespaces (lhbench-*), tbf on both ends
// Targets: goodput >= 0.9x iperf3; time for S bytes <= 1.15x (S/rate + RTT).
// Internal roles (--role recv|send) are the two processes of one transfer.
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "cpu_floor.h"
#include "longhaul/wan_transport/curve.h"
#include "longhaul/wan_transport/endpoint.h"
#include "longhaul/wan_transport/link_emulator.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "wan_roles.h"

namespace fs = std::filesystem;
using namespace longhaul;
using namespace std::chrono_literals;

namespace {

std::string g_self;

// A child process with stdout piped (stderr discarded); killed with its
// process group and reaped on destruction.
class Proc {
 public:
  explicit Proc(const std::vector<std::string>& argv) {
    auto p = testing::Subprocess::Spawn(argv, {.log_path = "/dev/null", .capture_stdout = true});
    if (p.ok()) p_ = std::move(*p);
    else std::fprintf(stderr, "cannot start %s: %s\n", argv[0].c_str(), p.status().ToString().c_str());
  }
  // Reads until a line starting with prefix (rest returned) or timeout/EOF.
  std::optional<std::string> Expect(const std::string& prefix, std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      const std::string line = p_.ReadLine(std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now()));
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      if (line.rfind("error", 0) == 0) std::fprintf(stderr, "  child: %s\n", line.c_str());
      if (line.empty() && !p_.Running()) break;
    }
    return std::nullopt;
  }
  std::string ReadAll(std::chrono::seconds timeout) { return p_.ReadAll(timeout); }

 private:
  testing::Subprocess p_;
};

std::vector<std::string> In(const std::string& ns, std::vector<std::string> cmd) {
  if (ns.empty()) return cmd;
  std::vector<std::string> out = {"ip", "netns", "exec", ns};
  out.insert(out.end(), cmd.begin(), cmd.end());
  return out;
}

struct Path {
  std::string name;
  double rate_bytes = 0;  // 0 = unknown (loopback)
  double rtt_s = 0;
  int streams = 4;
  size_t bytes = 0;
  bool encryption = true;
  std::string recv_ns, send_ns, recv_ip = "127.0.0.1";
  std::unique_ptr<wan_transport::LinkEmulator> (*relay)(const Path&, const std::string& target) = nullptr;
};

std::unique_ptr<wan_transport::LinkEmulator> Linkem(const Path& p, const std::string& target) {
  wan_transport::LinkEmulatorOptions o;
  o.forward = target;
  o.rate_bytes_per_second = p.rate_bytes;
  o.delay = std::chrono::microseconds(static_cast<long>(p.rtt_s / 2 * 1e6));
  auto e = wan_transport::LinkEmulator::Start(o);
  if (!e.ok()) {
    std::fprintf(stderr, "linkem: %s\n", e.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*e);
}

struct WanRun {
  double seconds = 0;
  double cpu_seconds = 0;  // sender's and receiver's processes together, during the timed transfer
  long page_faults = 0;    // the same
};

// Time and CPU to move p.bytes through the WAN data plane, or nullopt.
std::optional<WanRun> RunWan(const Path& p, const std::string& dir) {
  std::vector<std::string> common = {"--dir", dir, "--bytes", std::to_string(p.bytes), "--streams", std::to_string(p.streams)};
  if (!p.encryption) common.push_back("--no-encryption");
  auto recv_cmd = In(p.recv_ns, {g_self, "--role", "recv", "--bind", p.recv_ip + ":0"});
  recv_cmd.insert(recv_cmd.end(), common.begin(), common.end());
  Proc recv(recv_cmd);
  auto ep = recv.Expect("endpoint ", 10s);
  if (!ep) return std::nullopt;
  std::string target = *ep;
  std::unique_ptr<wan_transport::LinkEmulator> relay;
  if (p.relay) {
    relay = p.relay(p, target.substr(6));  // strip tcp://
    if (!relay) return std::nullopt;
    target = "tcp://" + relay->listen_address();
  }
  const fs::path go = fs::path(dir) / "go";
  fs::remove(go);
  if (::mkfifo(go.c_str(), 0600) != 0) {
    std::fprintf(stderr, "cannot create the FIFO %s\n", go.c_str());
    return std::nullopt;
  }
  auto send_cmd = In(p.send_ns, {g_self, "--role", "send", "--to", target, "--go", go.string()});
  send_cmd.insert(send_cmd.end(), common.begin(), common.end());
  Proc send(send_cmd);
  // Read-write, so opening does not wait for the sender; the byte stays in the
  // FIFO until the sender, done with its warm-up, opens it and reads.
  const int signal = recv.Expect("ready", 120s) ? ::open(go.c_str(), O_RDWR) : -1;
  const bool go_sent = signal >= 0 && ::write(signal, "g", 1) == 1;
  auto sent = go_sent ? send.Expect("seconds ", 120s) : std::nullopt;
  if (signal >= 0) ::close(signal);
  fs::remove(go);
  auto received = sent ? recv.Expect("received ", 10s) : std::nullopt;
  if (!received) return std::nullopt;
  // "T cpu C faults F" and "N cpu C faults F"
  auto cpu = [](const std::string& line) { return std::stod(line.substr(line.find(" cpu ") + 5)); };
  auto faults = [](const std::string& line) { return std::stol(line.substr(line.find(" faults ") + 8)); };
  return WanRun{std::stod(*sent), cpu(*sent) + cpu(*received), faults(*sent) + faults(*received)};
}

struct IperfRun {
  double bytes_per_second = 0;  // goodput, receiver side
  double cpu_per_gb = 0;        // CPU-seconds of client and server per GB received (the kernel's TCP cost)
};

// iperf3 with the same stream count on the same path.
std::optional<IperfRun> RunIperf(const Path& p, int seconds) {
  int port = 20000 + static_cast<int>(std::random_device{}() % 20000);
  Proc server(In(p.recv_ns, {"iperf3", "-s", "-1", "--forceflush", "-B", p.recv_ip, "-p", std::to_string(port)}));
  if (!server.Expect("Server listening", 10s)) {
    std::fprintf(stderr, "iperf3 -s did not start listening on port %d\n", port);
    return std::nullopt;
  }
  std::string host = p.recv_ip;
  int cport = port;
  std::unique_ptr<wan_transport::LinkEmulator> relay;
  if (p.relay) {
    relay = p.relay(p, p.recv_ip + ":" + std::to_string(port));
    if (!relay) return std::nullopt;
    cport = relay->port();
  }
  Proc client(In(p.send_ns, {"iperf3", "-c", host, "-p", std::to_string(cport), "-P", std::to_string(p.streams), "-t",
                             std::to_string(seconds), "-J"}));
  std::string out = client.ReadAll(std::chrono::seconds(seconds + 20));
  try {
    auto j = nlohmann::json::parse(out);
    const auto& received = j["end"]["sum_received"];
    const auto& cpu = j["end"]["cpu_utilization_percent"];
    const double cpu_s = (cpu["host_total"].get<double>() + cpu["remote_total"].get<double>()) / 100 *
                         received["seconds"].get<double>();
    return IperfRun{received["bits_per_second"].get<double>() / 8, cpu_s / (received["bytes"].get<double>() / 1e9)};
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iperf3 output not understood: %s\n", e.what());
    return std::nullopt;
  }
}

int Sh(const std::string& cmd) {
  std::string output;
  return testing::RunCommand(cmd, &output, 60s);
}

void TeardownNetns() {
  Sh("ip netns del lhbench-a");
  Sh("ip netns del lhbench-b");
}

bool SetupNetns(double rate_mbit) {
  TeardownNetns();
  std::string r = std::to_string(static_cast<int>(rate_mbit)) + "mbit";
  const char* steps[] = {
      "ip netns add lhbench-a", "ip netns add lhbench-b",
      "ip link add lhbench-va type veth peer name lhbench-vb",
      "ip link set lhbench-va netns lhbench-a", "ip link set lhbench-vb netns lhbench-b",
      "ip -n lhbench-a addr add 10.213.7.1/24 dev lhbench-va", "ip -n lhbench-b addr add 10.213.7.2/24 dev lhbench-vb",
      "ip -n lhbench-a link set lhbench-va up", "ip -n lhbench-b link set lhbench-vb up",
      "ip -n lhbench-a link set lo up", "ip -n lhbench-b link set lo up"};
  for (const char* s : steps) {
    if (Sh(s) != 0) {
      std::fprintf(stderr, "netns setup failed at: %s\n", s);
      return false;
    }
  }
  // tbf shapes egress only: both ends, for a symmetric link.
  for (std::string side : {"a", "b"}) {
    if (Sh("ip netns exec lhbench-" + side + " tc qdisc add dev lhbench-v" + side + " root tbf rate " + r +
           " burst 256kb latency 50ms") != 0) {
      std::fprintf(stderr, "tbf setup failed\n");
      return false;
    }
  }
  return true;
}

int Orchestrate(bool quick, int only) {
  const testing::TempDir keys_dir("bench-keys");
  const fs::path& dir = keys_dir.path();
  for (const char* who : {"recv", "send"}) {
    auto k = wan_transport::GenerateCurveKeyPair();
    if (!k.ok() || !wan_transport::WriteKeyPair(dir, who, *k).ok()) {
      std::fprintf(stderr, "cannot write bench keys in %s\n", dir.c_str());
      return 1;
    }
  }
  const size_t MiB = size_t{1} << 20;
  std::vector<Path> paths;
  paths.push_back({"loopback, CURVE", 0, 0, 2, (quick ? 64 : 256) * MiB});
  paths.push_back({"loopback, no encryption", 0, 0, 2, (quick ? 64 : 256) * MiB, false});
  for (double mbit : {100.0, 1000.0}) {
    for (double rtt_ms : {20.0, 80.0}) {
      Path p{"linkem " + std::to_string(static_cast<int>(mbit)) + " Mbit/s, RTT " + std::to_string(static_cast<int>(rtt_ms)) + " ms",
             mbit * 1e6 / 8, rtt_ms / 1000, 4};
      p.bytes = static_cast<size_t>(p.rate_bytes * (quick ? 1.5 : 3.0));
      p.relay = &Linkem;
      paths.push_back(p);
    }
  }
  bool have_netns = only < 0 || only >= static_cast<int>(paths.size()) ? SetupNetns(500) : false;
  if (have_netns) {
    Path p{"netns veth + tbf 500 Mbit/s", 500e6 / 8, 0, 4};
    p.bytes = static_cast<size_t>(p.rate_bytes * (quick ? 1.5 : 3.0));
    p.recv_ns = "lhbench-b";
    p.send_ns = "lhbench-a";
    p.recv_ip = "10.213.7.2";
    paths.push_back(p);
  }

  // The floor per GB, measured here on messages of the transport's chunk size.
  const size_t chunk = wan_transport::WanOptions{}.chunk_bytes;
  const double floor_curve = bench::FloorCpuSecondsPerGb(true, chunk);
  const double floor_plain = bench::FloorCpuSecondsPerGb(false, chunk);
  std::printf("CPU floor per GB (this run, %zu KiB messages): CURVE %.3f s (crypto_box_easy_afternm + open + memcpy per side), "
              "no encryption %.3f s (memcpy per side)\n", chunk >> 10, floor_curve, floor_plain);
  std::printf("%-34s %3s %9s %11s %11s %7s %9s %9s %7s %9s %8s %7s %10s\n", "path", "K", "MiB", "wan MB/s", "iperf3 MB/s", "ratio",
              "time s", "ideal s", "t/ideal", "cpu s/GB", "x floor", "faults", "iperf3 cpu");
  std::fflush(stdout);
  int failures = 0;
  double worst_cpu = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    const Path& p = paths[i];
    if (only >= 0 && static_cast<int>(i) != only) continue;
    auto run = RunWan(p, dir.string());
    auto iperf = RunIperf(p, quick ? 2 : 3);
    double good = run ? static_cast<double>(p.bytes) / run->seconds : 0;
    std::string ideal = "-", over = "-";
    if (p.rate_bytes > 0 && run) {
      double t_ideal = static_cast<double>(p.bytes) / p.rate_bytes + p.rtt_s;
      ideal = std::to_string(t_ideal).substr(0, 6);
      over = std::to_string(run->seconds / t_ideal).substr(0, 5);
    }
    const double cpu_per_gb = run ? run->cpu_seconds / (static_cast<double>(p.bytes) / 1e9) : 0;
    const double x_floor = cpu_per_gb / (p.encryption ? floor_curve : floor_plain);
    if (run) worst_cpu = std::max(worst_cpu, p.encryption ? x_floor : 0.0);
    const double iperf_rate = iperf ? iperf->bytes_per_second : 0;
    std::printf("%-34s %3d %9.1f %11.1f %11.1f %7.2f %9.3f %9s %7s %9.3f %8.2f %7ld %10.3f\n", p.name.c_str(), p.streams,
                static_cast<double>(p.bytes) / MiB, good / 1e6, iperf_rate / 1e6, iperf_rate > 0 ? good / iperf_rate : 0.0,
                run ? run->seconds : 0.0, ideal.c_str(), over.c_str(), cpu_per_gb, x_floor, run ? run->page_faults : 0L,
                iperf ? iperf->cpu_per_gb : 0.0);
    std::fflush(stdout);
    if (!run || !iperf) ++failures;
  }
  if (!have_netns) std::printf("(c) skipped: could not create network namespaces (needs root and iproute2)\n");
  TeardownNetns();
  std::printf("targets: ratio >= 0.90 (goodput vs iperf3, same path, same stream count); t/ideal <= 1.15 where ideal = S/rate + RTT\n");
  std::printf("cpu s/GB = CPU of the sending and receiving processes during the transfer (relays excluded); "
              "target <= 1.50x floor with CURVE, worst here %.2fx;\n"
              "faults = page faults of both processes during the transfer; iperf3 cpu = CPU s/GB of iperf3 (plain TCP) on the same path\n",
              worst_cpu);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_wan_throughput - WAN data-plane goodput next to iperf3"};
  std::string role;
  bench::RoleOptions ro;
  bool no_encryption = false, quick = false;
  app.add_option("--role", role, "internal: recv | send")->check(CLI::IsMember({"recv", "send"}));
  app.add_option("--dir", ro.dir, "internal: key directory");
  app.add_option("--bind", ro.bind, "internal: receiver bind IP:0");
  app.add_option("--to", ro.to, "internal: sender target tcp://IP:PORT");
  app.add_option("--bytes", ro.bytes, "internal: message size");
  app.add_option("--streams", ro.streams, "internal: connections per peer");
  app.add_flag("--no-encryption", no_encryption, "internal: CURVE off");
  app.add_option("--go", ro.go, "internal: FIFO the sender waits on before its timed transfer");
  int only = -1;
  app.add_option("--only", only, "run only path number N (0-based, in table order)");
  app.add_flag("--quick", quick, "smaller transfers and shorter iperf3 runs");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "bench_wan_throughput: %s\n", e.what());
    return 2;
  }
  ro.encryption = !no_encryption;
  if (role == "recv") return bench::RunReceiver(ro);
  if (role == "send") return bench::RunSender(ro);
  g_self = fs::canonical("/proc/self/exe").string();
  ::signal(SIGPIPE, SIG_IGN);
  return Orchestrate(quick, only);
}
