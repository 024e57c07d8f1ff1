// A real Prometheus server scrapes a real longhaul /metrics endpoint.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <prometheus/counter.h>

#include "longhaul/monitoring/metrics_server.h"
#include "monitoring/tls_fixture.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace std::chrono_literals;

TEST_CASE("Prometheus scrapes a longhaul metrics endpoint and answers queries on it", "[monitoring][prometheus]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  auto& family =
      prometheus::BuildCounter().Name("longhaul_scrape_probe_total").Help("probe").Register((*server)->registry());
  family.Add({{"region", "eu-west"}}).Increment(7);

  testing::TempDir tmp("prometheus");
  const std::string dir = tmp.path().string();
  const int prom_port = testing::FreeLoopbackPort();
  {
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << "global: {scrape_interval: 1s}\n"
        << "scrape_configs:\n  - job_name: longhaul-test\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << (*server)->port() << "']\n";
  }
  auto prom = testing::Subprocess::Spawn(
      {"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml",
       "--storage.tsdb.path=" + dir + "/data", "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
      {.log_path = dir + "/prometheus.log"});
  REQUIRE(prom.ok());

  // The first sample lands a few seconds after start; poll the query API, bounded.
  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + 40s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = testing::HttpGet(prom_port, "/api/v1/query?query=longhaul_scrape_probe_total");
    if (got && got->find("eu-west") != std::string::npos) {
      body = *got;
      break;
    }
    std::this_thread::sleep_for(500ms);
  }
  INFO(prom->Log());
  REQUIRE(body.find("\"status\":\"success\"") != std::string::npos);
  REQUIRE(body.find("\"region\":\"eu-west\"") != std::string::npos);
  REQUIRE(body.find("\"7\"") != std::string::npos);
}

TEST_CASE("Prometheus scrapes a longhaul endpoint over HTTPS with basic auth from a web.yml",
          "[monitoring][prometheus][tls]") {
  testing::TempDir tmp("prometheus-tls");
  const std::string dir = tmp.path().string();
  std::string log;
  auto files = testing::MakeSelfSignedCert(tmp.path(), &log);
  INFO(log);
  REQUIRE(files.has_value());
  const std::string password = "scrape-me";
  const std::string hash = testing::BcryptHash(password);
  REQUIRE_FALSE(hash.empty());
  testing::WriteFile(tmp.path() / "web.yml", "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
                                             "  min_version: TLS12\nbasic_auth_users:\n  prometheus: '" + hash + "'\n");
  // Prometheus's own checker accepts the file our server reads.
  std::string check;
  const int checked = testing::RunCommand("promtool check web-config " + dir + "/web.yml", &check);
  INFO(check);
  CHECK(checked == 0);

  monitoring::MetricsServerOptions options;
  options.web_config_file = dir + "/web.yml";
  auto server = monitoring::MetricsServer::Start(options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  auto& family =
      prometheus::BuildCounter().Name("longhaul_tls_probe_total").Help("probe").Register((*server)->registry());
  family.Add({{"region", "ap-south"}}).Increment(11);

  const int prom_port = testing::FreeLoopbackPort();
  testing::WriteFile(tmp.path() / "prometheus.yml",
                     "global: {scrape_interval: 1s}\n"
                     "scrape_configs:\n  - job_name: longhaul-tls\n    scheme: https\n"
                     "    basic_auth: {username: prometheus, password: '" + password + "'}\n"
                     "    tls_config: {ca_file: '" + files->cert + "', server_name: localhost}\n"
                     "    static_configs:\n      - targets: ['127.0.0.1:" + std::to_string((*server)->port()) + "']\n");
  auto prom = testing::Subprocess::Spawn(
      {"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
      {.log_path = dir + "/prometheus.log"});
  REQUIRE(prom.ok());

  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + 40s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = testing::HttpGet(prom_port, "/api/v1/query?query=longhaul_tls_probe_total");
    if (got && got->find("ap-south") != std::string::npos) {
      body = *got;
      break;
    }
    std::this_thread::sleep_for(500ms);
  }
  INFO(prom->Log());
  INFO(testing::HttpGet(prom_port, "/api/v1/targets").value_or("(no targets answer)"));
  REQUIRE(body.find("\"status\":\"success\"") != std::string::npos);
  REQUIRE(body.find("\"11\"") != std::string::npos);
}
