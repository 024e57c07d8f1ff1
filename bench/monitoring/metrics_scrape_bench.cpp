// bench_metrics_scrape: /metrics scrape latency with idle connections around.
//
// The issue: about 100 idle connections, reopened as the server drops them,
// made every scrape time out. This starts a MetricsServer with a registry of
// --series counter series, scrapes it --scrapes times with no other client
// (the baseline), then again while --idle connections that never send a byte
// are held open and reopened as soon as the server closes them, the scrapes
// spread over --duration-s (longer than the server's 5 s request timeout, so
// the crowd is dropped and reopened during the run). Prints p50/p99/max
// latency of both side by side and their ratio; a scrape that fails or takes
// longer than Prometheus's 10 s scrape timeout counts as failed.
#include <prometheus/counter.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/monitoring/metrics_server.h"
#include "monitoring/scrape_client.h"

using namespace longhaul;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kScrapeTimeout = std::chrono::seconds(10);  // Prometheus's default scrape_timeout

struct Latencies {
  std::vector<double> ms;
  int failed = 0;
  double Quantile(double q) const {
    if (ms.empty()) return 0;
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  }
  double Max() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }
};

// `count` scrapes, started `spacing` apart (0: back to back).
Latencies ScrapeSeries(int port, int count, Clock::duration spacing) {
  Latencies out;
  const auto t0 = Clock::now();
  for (int i = 0; i < count; ++i) {
    std::this_thread::sleep_until(t0 + i * spacing);  // pacing the load, not synchronisation
    auto reply = testing::Scrape(port, kScrapeTimeout);
    if (!reply || reply->status != 200 || reply->body.empty()) {
      ++out.failed;
      out.ms.push_back(std::chrono::duration<double, std::milli>(kScrapeTimeout).count());
      continue;
    }
    out.ms.push_back(reply->seconds * 1e3);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_metrics_scrape: /metrics scrape latency with 0 and with N idle connections"};
  int idle = 200, scrapes = 40, series = 1000, duration_s = 12;
  app.add_option("--idle", idle, "idle connections held open and reopened")->check(CLI::Range(1, 5000));
  app.add_option("--scrapes", scrapes, "scrapes per configuration")->check(CLI::Range(1, 100000));
  app.add_option("--series", series, "counter series in the registry")->check(CLI::Range(1, 1000000));
  app.add_option("--duration-s", duration_s, "seconds the scrapes with idle connections are spread over")
      ->check(CLI::Range(0, 3600));
  CLI11_PARSE(app, argc, argv);

  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  if (!server.ok()) {
    std::fprintf(stderr, "bench_metrics_scrape: %s\n", server.status().ToString().c_str());
    return 1;
  }
  auto& family = prometheus::BuildCounter()
                     .Name("longhaul_bench_events_total")
                     .Help("bench series")
                     .Register((*server)->registry());
  for (int i = 0; i < series; ++i) family.Add({{"region", "r" + std::to_string(i)}}).Increment(i);
  const int port = (*server)->port();
  auto probe = testing::Scrape(port, kScrapeTimeout);
  std::printf("bench_metrics_scrape: %s, %d series (%zu bytes a scrape), %d scrapes each\n", (*server)->url().c_str(),
              series, probe ? probe->body.size() : size_t{0}, scrapes);

  const Latencies base = ScrapeSeries(port, scrapes, Clock::duration::zero());

  const auto spacing = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(duration_s)) / scrapes;
  // Bounded: outlives the slowest possible series of scrapes, then stops by itself.
  testing::IdleCrowd crowd(port, static_cast<size_t>(idle), /*reopen=*/true,
                           std::chrono::seconds(duration_s) + kScrapeTimeout * scrapes + std::chrono::seconds(30));
  const bool opened =
      crowd.WaitFor([&](const testing::IdleCrowd& c) { return c.open() >= static_cast<size_t>(idle) || !c.running(); },
                    std::chrono::seconds(30));
  const size_t open_at_start = crowd.open();
  const Latencies loaded = ScrapeSeries(port, scrapes, spacing);
  const size_t reopened = crowd.reopened();
  crowd.Stop();

  std::printf("%-28s %10s %10s %10s %8s\n", "idle connections", "p50 ms", "p99 ms", "max ms", "failed");
  std::printf("%-28s %10.2f %10.2f %10.2f %8d\n", "0", base.Quantile(0.5), base.Quantile(0.99), base.Max(),
              base.failed);
  const std::string label = std::to_string(idle) + " (" + std::to_string(reopened) + " reopened)";
  std::printf("%-28s %10.2f %10.2f %10.2f %8d\n", label.c_str(), loaded.Quantile(0.5), loaded.Quantile(0.99),
              loaded.Max(), loaded.failed);
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::printf("%-28s %9.2fx %9.2fx %9.2fx\n", "ratio (idle / none)", ratio(loaded.Quantile(0.5), base.Quantile(0.5)),
              ratio(loaded.Quantile(0.99), base.Quantile(0.99)), ratio(loaded.Max(), base.Max()));
  if (!opened) std::printf("note: only %zu of %d idle connections could be opened\n", open_at_start, idle);
  return base.failed + loaded.failed == 0 ? 0 : 2;
}
