// bench_wan_round: wall time of one outer round (AllReduceMean of a model-sized
// pseudo-gradient) across M regions, next to the lower bound
//   2(M-1)/M * S_compressed / bottleneck_bandwidth + (M-1) * RTT
// where S_compressed is the codec's exact encoded size, bandwidth the linkem
// rate and RTT twice its one-way delay.
//
// Setup (one process): M WanEndpoints (CURVE on), each listener fronted by its
// own LinkEmulator (the code behind longhaul-linkem) at the chosen rate/delay.
// Peers reach a region only through that region's emulator, so every ring hop
// crosses one emulated WAN link. Connections are warmed up (CURVE handshakes)
// by a small all-reduce before timing; each timed round joins a fresh group, as
// the worker does per outer round. Target: measured / bound <= 1.2.
//
// --cpu-only prints CPU-seconds per GB of payload over direct links next to a
// floor measured in the same run (bench/support/cpu_floor.h); with --replica
// each of those rounds is the worker's whole outer round (RegionReplica), so
// its model-sized work (snapshot, outer step, hash) shows in CPU and page faults.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu_floor.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cross_region.h"
#include "longhaul/wan_transport/curve.h"
#include "longhaul/wan_transport/endpoint.h"
#include "longhaul/wan_transport/link_emulator.h"
#include "longhaul/worker/region_replica.h"

using namespace longhaul;
namespace wt = longhaul::wan_transport;
namespace sp = longhaul::sync_policies;
namespace lw = longhaul::worker;

namespace {

struct Cluster {
  std::vector<std::unique_ptr<wt::WanEndpoint>> endpoints;
  std::vector<std::unique_ptr<wt::LinkEmulator>> relays;
  std::vector<wt::PeerSpec> peers;  // ring order, endpoint = the region's relay
  uint32_t next_round = 1;
};

// rate_bytes == 0: no emulator, peers reach each other's listeners directly
// (the CPU-per-byte rows, which must not count the relays' copies).
Result<Cluster> StartCluster(int regions, double rate_bytes, double rtt_s, size_t max_bytes, bool encryption = true) {
  std::vector<wt::CurveKeyPair> keys;
  std::vector<std::string> pubs;
  for (int r = 0; r < regions; ++r) {
    LONGHAUL_ASSIGN_OR_RETURN(auto k, wt::GenerateCurveKeyPair());
    pubs.push_back(k.public_key);
    keys.push_back(std::move(k));
  }
  Cluster c;
  for (int r = 0; r < regions; ++r) {
    wt::WanOptions o;
    o.job_id = "bench_wan_round";
    o.keys = keys[r];
    o.allowlist = wt::Allowlist::Of(pubs);
    o.max_inflight_bytes = std::max<size_t>(size_t{64} << 20, max_bytes + (size_t{8} << 20));
    o.max_message_bytes = std::max<size_t>(size_t{64} << 20, 2 * max_bytes);
    o.timeouts.link_io = std::chrono::seconds(60);
    o.encryption = encryption;
    LONGHAUL_ASSIGN_OR_RETURN(auto ep, wt::WanEndpoint::Bind("127.0.0.1:0", o));
    if (rate_bytes == 0) {
      c.peers.push_back({ep->endpoint(), ep->public_key()});
      c.endpoints.push_back(std::move(ep));
      continue;
    }
    wt::LinkEmulatorOptions lo;
    lo.forward = ep->endpoint().substr(6);  // strip tcp://
    lo.rate_bytes_per_second = rate_bytes;
    lo.delay = std::chrono::microseconds(static_cast<long>(rtt_s / 2 * 1e6));
    LONGHAUL_ASSIGN_OR_RETURN(auto relay, wt::LinkEmulator::Start(lo));
    c.peers.push_back({"tcp://" + relay->listen_address(), ep->public_key()});
    c.endpoints.push_back(std::move(ep));
    c.relays.push_back(std::move(relay));
  }
  return c;
}

struct RoundResult {
  double seconds = 0;      // wall time of the slowest region
  double cpu_seconds = 0;  // CPU the whole process used meanwhile (all regions, relays, I/O threads)
  long page_faults = 0;    // the same
  uint64_t bytes_sent = 0; // payload bytes region 0 sent
  uint64_t all_bytes_sent = 0;  // payload bytes all regions sent
};

// Joins every region to a fresh group (one outer round, as the worker does) and
// runs run_region(r, round, link) for all regions in parallel threads; returns
// the wall time and the whole process's CPU and page faults meanwhile.
template <typename RunRegion>
Result<RoundResult> TimedRound(Cluster& c, RunRegion run_region) {
  const int m = static_cast<int>(c.endpoints.size());
  const uint32_t round = c.next_round++;
  std::vector<std::unique_ptr<sp::CollectiveLink>> links;
  for (int r = 0; r < m; ++r) {
    LONGHAUL_ASSIGN_OR_RETURN(auto l, c.endpoints[r]->Join({"bench_wan_round", round, 1, r, c.peers}));
    links.push_back(std::move(l));
  }
  const bench::ProcessUsage before = bench::UsageNow();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < m; ++r) threads.emplace_back([&, r] { run_region(r, round, *links[r]); });
  for (auto& t : threads) t.join();
  RoundResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bench::ProcessUsage used = bench::UsageNow() - before;
  result.cpu_seconds = used.cpu_seconds;
  result.page_faults = used.page_faults;
  return result;
}

// One all-reduce of `floats` values per region, all regions in parallel threads.
Result<RoundResult> Round(Cluster& c, size_t floats, const sp::CompressionOptions& codec,
                                          std::chrono::seconds timeout) {
  const int m = static_cast<int>(c.endpoints.size());
  std::vector<std::vector<float>> data(m);
  for (int r = 0; r < m; ++r) {
    data[r].resize(floats);
    for (size_t i = 0; i < floats; ++i) data[r][i] = static_cast<float>(((i * 2654435761u + r * 97) % 2001) - 1000) * 1e-3f;
  }
  std::vector<Status> status(m, Status::Ok());
  std::vector<sp::CollectiveStats> stats(m);
  auto deadline = DeadlineAfter(timeout);
  LONGHAUL_ASSIGN_OR_RETURN(RoundResult result, TimedRound(c, [&](int r, uint32_t, sp::CollectiveLink& link) {
    status[r] = sp::AllReduceMean(link, data[r], codec, deadline, &stats[r]);
  }));
  result.bytes_sent = stats[0].bytes_sent;
  for (const auto& st : stats) result.all_bytes_sent += st.bytes_sent;
  for (int r = 0; r < m; ++r) {
    if (!status[r].ok()) return Status(status[r].code(), "region " + std::to_string(r) + ": " + status[r].ToString());
  }
  for (int r = 1; r < m; ++r) {
    if (data[r] != data[0]) return Internal("regions 0 and " + std::to_string(r) + " hold different means after the round");
  }
  // Flush so the last sends' acks do not overlap the next round.
  for (auto& ep : c.endpoints) LONGHAUL_RETURN_IF_ERROR(ep->Flush(DeadlineAfter(timeout)));
  return result;
}

// One region of the --replica rows: the worker's RegionReplica over `params`.
struct Region {
  std::vector<float> params;
  std::unique_ptr<trainer::IntraRegionGroup> group = trainer::MakeSingleRankGroup();
  std::unique_ptr<lw::RegionReplica> replica;
};

Result<std::vector<std::unique_ptr<Region>>> MakeRegions(int m, size_t floats, const sp::CompressionOptions& codec,
                                                         std::chrono::seconds timeout) {
  std::vector<std::unique_ptr<Region>> regions;
  for (int r = 0; r < m; ++r) {
    auto g = std::make_unique<Region>();
    g->params.resize(floats);
    for (size_t i = 0; i < floats; ++i) g->params[i] = static_cast<float>((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
    lw::ReplicaOptions o;
    o.region = std::to_string(r);
    o.region.insert(0, 1, 'r');
    o.schedule.kind = sp::SyncKind::kDiLoCo;
    o.schedule.inner_steps = 1;
    o.compression = codec;
    o.collective_timeout = timeout;  // the all-reduce's deadline, as Round's
    LONGHAUL_ASSIGN_OR_RETURN(g->replica, lw::RegionReplica::Create(o, g->params, *g->group));
    regions.push_back(std::move(g));
  }
  return regions;
}

// The worker's whole outer round in every region at once: BeginRound (the
// snapshot a rollback returns to), one inner "step" that moves every parameter
// by its own amount (a dense pseudo-gradient, as training gives, with few ties
// for top-k's selection to break), the exchange
// (pseudo-gradient, its guard, the all-reduce, the outer step), EndRound and
// Commit, as the worker runs it on the orchestrator's START and COMMIT.
Result<RoundResult> ReplicaRound(Cluster& c, std::vector<std::unique_ptr<Region>>& regions,
                                 std::chrono::seconds timeout) {
  const int m = static_cast<int>(c.endpoints.size());
  std::vector<Result<lw::RoundResult>> results(m, Internal("not run"));
  LONGHAUL_ASSIGN_OR_RETURN(RoundResult result, TimedRound(c, [&](int r, uint32_t round, sp::CollectiveLink& link) {
    Region& g = *regions[r];
    if (Status s = g.replica->BeginRound({.round = round, .epoch = 1}, &link); !s.ok()) {
      results[r] = s;
      return;
    }
    for (size_t i = 0; i < g.params.size(); ++i)  // by 1e-6..1e-3, few ties
      g.params[i] += static_cast<float>((i * 2654435761u + round * 97 + r) % 1000 + 1) * 1e-6f;
    if (auto more = g.replica->AfterInnerStep(1.0f, 0, 0.0); !more.ok()) {
      results[r] = more.status();
      return;
    }
    results[r] = g.replica->EndRound();
    if (results[r].ok()) g.replica->Commit();
  }));
  for (int r = 0; r < m; ++r) {
    if (!results[r].ok()) return Status(results[r].status().code(), "region " + std::to_string(r) + ": " + results[r].status().ToString());
    if (r == 0) result.bytes_sent = results[r]->wan_bytes_sent;
    result.all_bytes_sent += results[r]->wan_bytes_sent;
    if (results[r]->param_hash != results[0]->param_hash)
      return Internal("regions 0 and " + std::to_string(r) + " committed different parameters");
  }
  for (auto& ep : c.endpoints) LONGHAUL_RETURN_IF_ERROR(ep->Flush(DeadlineAfter(timeout)));
  return result;
}

template <typename T>
Result<std::vector<T>> ParseList(const std::string& text, const char* what) {
  std::vector<T> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      double v = std::stod(item, &used);
      if (used != item.size() || !(v > 0)) throw std::invalid_argument(item);
      out.push_back(static_cast<T>(v));
    } catch (const std::exception&) {
      return InvalidArgument(std::string("--") + what + ": '" + item + "' is not a positive number");
    }
  }
  if (out.empty()) return InvalidArgument(std::string("--") + what + " is empty");
  return out;
}

// CPU-seconds per GB of payload for whole rounds over direct loopback links
// (no emulator, unpaced): encode, encrypt, send, receive, decrypt, reassemble
// and decode-accumulate of every region, next to the floor measured now on
// messages of the transport's chunk size. With `replica`, each round is the
// worker's whole outer round (ReplicaRound) rather than the all-reduce alone.
// Returns the worst CURVE ratio, or -1 when a round failed.
double CpuPerByte(int m, const std::vector<double>& sizes_mb, const sp::CompressionOptions& codec,
                  const sp::Compressor& compressor, int reps, bool replica) {
  const size_t chunk = wt::WanOptions{}.chunk_bytes;
  std::printf("\nCPU per GB of payload: direct loopback links (no linkem, unpaced), whole process (%d regions)%s\n", m,
              replica ? ", whole outer rounds (RegionReplica: snapshot, pseudo-gradient, all-reduce, outer step, commit)"
                      : "");
  std::printf("floor = crypto_box_easy_afternm + open (CURVE only) + one memcpy per side, per payload byte, measured now\n");
  std::printf("%8s %6s %12s %10s %8s %9s %10s %8s %8s\n", "model_MB", "curve", "payload_MB", "round_s", "cpu_s",
              "cpu_s/GB", "floor_s/GB", "x_floor", "faults");
  const size_t max_floats = static_cast<size_t>(*std::max_element(sizes_mb.begin(), sizes_mb.end()) * 1e6 / 4);
  double worst = 0;
  for (bool encryption : {true, false}) {
    const double floor = bench::FloorCpuSecondsPerGb(encryption, chunk);
    auto cluster = StartCluster(m, 0, 0, compressor.EncodedBytes(max_floats) / m + (size_t{1} << 20), encryption);
    if (!cluster.ok()) {
      std::fprintf(stderr, "cluster: %s\n", cluster.status().ToString().c_str());
      return -1;
    }
    for (double mb : sizes_mb) {
      const size_t floats = static_cast<size_t>(mb * 1e6 / 4);
      std::vector<std::unique_ptr<Region>> regions;
      if (replica) {
        auto made = MakeRegions(m, floats, codec, std::chrono::seconds(300));
        if (!made.ok()) {
          std::fprintf(stderr, "regions: %s\n", made.status().ToString().c_str());
          return -1;
        }
        regions = std::move(*made);
      }
      // A warm-up round of this size first: buffers pooled, connections set up.
      RoundResult best{0, 1e300, 0, 0, 0};
      for (int i = 0; i <= reps; ++i) {
        auto r = replica ? ReplicaRound(*cluster, regions, std::chrono::seconds(300))
                         : Round(*cluster, floats, codec, std::chrono::seconds(300));
        if (!r.ok()) {
          std::fprintf(stderr, "model %.0f MB, direct: %s\n", mb, r.status().ToString().c_str());
          return -1;
        }
        if (i > 0 && r->cpu_seconds < best.cpu_seconds) best = *r;
      }
      const double gb = static_cast<double>(best.all_bytes_sent) / 1e9;
      const double per_gb = best.cpu_seconds / gb;
      if (encryption) worst = std::max(worst, per_gb / floor);
      std::printf("%8.0f %6s %12.2f %10.3f %8.3f %9.3f %10.3f %8.2f %8ld\n", mb, encryption ? "on" : "off", gb * 1e3,
                  best.seconds, best.cpu_seconds, per_gb, floor, per_gb / floor, best.page_faults);
      std::fflush(stdout);
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_wan_round - one outer round over emulated WAN links next to its lower bound"};
  int regions = 3, reps = 2;
  std::string sizes_mb = "1,16,64,256", rates_mbit = "100,1000", rtts_ms = "20,80", codec_name = "int8";
  bool with_1gb = false, cpu_only = false, replica = false;
  std::string cpu_sizes_mb = "64,256";
  app.add_option("--regions", regions, "number of regions M (2..8)")->check(CLI::Range(2, 8));
  app.add_option("--sizes-mb", sizes_mb, "model sizes in MB of fp32 parameters, comma-separated");
  app.add_flag("--with-1gb", with_1gb, "also run a 1024 MB model (minutes at 100 Mbit/s, ~3 GB of RAM per region copy)");
  app.add_option("--rates-mbit", rates_mbit, "linkem rates in Mbit/s, comma-separated");
  app.add_option("--rtts-ms", rtts_ms, "round-trip times in ms (linkem delay = RTT/2 each way), comma-separated");
  app.add_option("--codec", codec_name, "fp32 | bf16 | int8 | int4 | fp4");
  app.add_option("--reps", reps, "timed rounds per configuration (the minimum is reported)")->check(CLI::Range(1, 20));
  app.add_option("--cpu-sizes-mb", cpu_sizes_mb, "model sizes of the CPU-per-byte rows (direct links)");
  auto* cpu_only_flag = app.add_flag("--cpu-only", cpu_only, "only the CPU-per-byte rows");
  app.add_flag("--replica", replica,
               "CPU-per-byte rows of the worker's whole outer round (RegionReplica), not the all-reduce alone")
      ->needs(cpu_only_flag);
  CLI11_PARSE(app, argc, argv);

  auto sizes = ParseList<double>(sizes_mb, "sizes-mb");
  auto rates = ParseList<double>(rates_mbit, "rates-mbit");
  auto rtts = ParseList<double>(rtts_ms, "rtts-ms");
  auto cpu_sizes = ParseList<double>(cpu_sizes_mb, "cpu-sizes-mb");
  auto codec = sp::ParseCodec(codec_name);
  for (const Status& s : {sizes.status(), rates.status(), rtts.status(), cpu_sizes.status(), codec.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "bench_wan_round: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  if (sp::Traits(*codec).sparse && !cpu_only) {
    std::fprintf(stderr, "bench_wan_round: --codec %s is an all-gather, not the ring bound this bench checks (--cpu-only takes it)\n",
                 codec_name.c_str());
    return 2;
  }
  if (with_1gb) sizes->push_back(1024);
  sp::CompressionOptions copt;
  copt.codec = *codec;
  auto compressor = sp::Compressor::Create(copt);
  if (!compressor.ok()) {
    std::fprintf(stderr, "bench_wan_round: %s\n", compressor.status().ToString().c_str());
    return 2;
  }
  const int m = regions;
  if (cpu_only) {
    const double worst_cpu = CpuPerByte(m, *cpu_sizes, copt, **compressor, reps, replica);
    if (replica) {  // the floor counts the payload's crypto and copies only, not the round's model-sized passes
      std::printf("worst CURVE cpu/floor %.2f (whole rounds: snapshot, outer step and hash are not in the floor)\n",
                  worst_cpu);
    } else {
      std::printf("worst CURVE cpu/floor %.2f (target <= 1.50)\n", worst_cpu);
    }
    return worst_cpu < 0 ? 1 : 0;
  }
  std::printf("M=%d regions, codec %s, %d timed round(s) per row (min reported), CURVE on\n", m, codec_name.c_str(), reps);
  std::printf("bound = 2(M-1)/M * S_compressed / rate + (M-1) * RTT\n");
  std::printf("cpu_s = CPU seconds of the whole process (%d regions, relays, I/O threads) during that round\n", m);
  std::printf("%8s %8s %7s %12s %12s %10s %8s %10s %7s\n", "model_MB", "rate_Mb", "rtt_ms", "S_comp_MB", "sent_MB/reg",
              "round_s", "cpu_s", "bound_s", "ratio");
  std::fflush(stdout);
  int failures = 0;
  double worst = 0;
  for (double rate : *rates) {
    for (double rtt_ms : *rtts) {
      double rate_bytes = rate * 1e6 / 8, rtt = rtt_ms / 1000;
      size_t max_floats = static_cast<size_t>(*std::max_element(sizes->begin(), sizes->end()) * 1e6 / 4);
      auto cluster = StartCluster(m, rate_bytes, rtt, (*compressor)->EncodedBytes(max_floats) / m + (size_t{1} << 20));
      if (!cluster.ok()) {
        std::fprintf(stderr, "cluster: %s\n", cluster.status().ToString().c_str());
        return 1;
      }
      auto warm = Round(*cluster, 4096, copt, std::chrono::seconds(30));
      if (!warm.ok()) {
        std::fprintf(stderr, "warm-up round: %s\n", warm.status().ToString().c_str());
        return 1;
      }
      for (double mb : *sizes) {
        size_t floats = static_cast<size_t>(mb * 1e6 / 4);
        double s_comp = static_cast<double>((*compressor)->EncodedBytes(floats));
        double bound = 2.0 * (m - 1) / m * s_comp / rate_bytes + (m - 1) * rtt;
        auto timeout = std::chrono::seconds(static_cast<long>(bound * 10) + 60);
        RoundResult best{1e300, 0, 0};
        bool ok = true;
        for (int i = 0; i < reps; ++i) {
          auto r = Round(*cluster, floats, copt, timeout);
          if (!r.ok()) {
            std::fprintf(stderr, "model %.0f MB, %.0f Mbit/s, %.0f ms: %s\n", mb, rate, rtt_ms, r.status().ToString().c_str());
            ok = false;
            break;
          }
          if (r->seconds < best.seconds) best = *r;
        }
        if (!ok) {
          ++failures;
          std::printf("%8.0f %8.0f %7.0f %12.2f %12s %10s %8s %10.3f %7s\n", mb, rate, rtt_ms, s_comp / 1e6, "-", "FAILED",
                      "-", bound, "-");
          continue;
        }
        worst = std::max(worst, best.seconds / bound);
        std::printf("%8.0f %8.0f %7.0f %12.2f %12.2f %10.3f %8.2f %10.3f %7.2f\n", mb, rate, rtt_ms, s_comp / 1e6,
                    best.bytes_sent / 1e6, best.seconds, best.cpu_seconds, bound, best.seconds / bound);
        std::fflush(stdout);
      }
    }
  }
  std::printf("worst ratio %.2f (target <= 1.20)%s\n", worst, failures ? ", some rows FAILED" : "");
  const double worst_cpu = CpuPerByte(m, *cpu_sizes, copt, **compressor, reps, replica);
  std::printf("worst CURVE cpu/floor %.2f (target <= 1.50)\n", worst_cpu);
  return failures == 0 && worst_cpu >= 0 ? 0 : 1;
}
