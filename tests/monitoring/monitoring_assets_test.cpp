// The shipped Prometheus config, alert rules and Grafana dashboards are valid.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

TEST_CASE("promtool accepts the Prometheus config and alert rules", "[monitoring]") {
  const std::string dir = std::string(LONGHAUL_SOURCE_DIR) + "/monitoring/prometheus";
  REQUIRE(std::system(("promtool check config " + dir + "/prometheus.yml > /dev/null").c_str()) == 0);
  REQUIRE(std::system(("promtool check rules " + dir + "/alerts.yml > /dev/null").c_str()) == 0);
}

TEST_CASE("Every Grafana dashboard is valid JSON whose panels query longhaul metrics", "[monitoring]") {
  const fs::path dir = fs::path(LONGHAUL_SOURCE_DIR) / "monitoring" / "dashboards";
  int dashboards = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++dashboards;
    std::ifstream in(entry.path());
    auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    INFO(entry.path());
    REQUIRE_FALSE(doc.is_discarded());
    REQUIRE(doc.contains("title"));
    REQUIRE(doc.contains("uid"));
    REQUIRE(doc["panels"].is_array());
    REQUIRE_FALSE(doc["panels"].empty());
    for (const auto& panel : doc["panels"]) {
      if (panel.value("type", "") == "row") continue;
      INFO(panel.value("title", "?"));
      REQUIRE(panel["targets"].is_array());
      for (const auto& target : panel["targets"])
        REQUIRE(target.value("expr", "").find("longhaul_") != std::string::npos);
    }
  }
  REQUIRE(dashboards >= 1);
}
