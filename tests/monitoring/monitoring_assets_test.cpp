// The shipped Prometheus config, alert rules and Grafana dashboards are valid.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/subprocess.h"

namespace fs = std::filesystem;

TEST_CASE("promtool accepts the Prometheus config and alert rules", "[monitoring]") {
  const std::string dir = std::string(LONGHAUL_SOURCE_DIR) + "/monitoring/prometheus";
  std::string out;
  const int config = longhaul::testing::RunCommand("promtool check config " + dir + "/prometheus.yml", &out);
  const int rules = longhaul::testing::RunCommand("promtool check rules " + dir + "/alerts.yml", &out);
  INFO(out);
  CHECK(config == 0);
  CHECK(rules == 0);
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

namespace {
std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every metric family name some longhaul process registers ("longhaul_..." in the sources).
std::set<std::string> ExportedMetricNames() {
  std::set<std::string> names;
  const std::regex quoted("\"(longhaul_[a-z0-9_]+)\"");
  for (const char* component : {"orchestrator", "region_agent", "worker", "wan_transport"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(LONGHAUL_SOURCE_DIR) / component)) {
      if (e.path().extension() != ".cpp" && e.path().extension() != ".h") continue;
      const std::string text = ReadFile(e.path());
      for (std::sregex_iterator it(text.begin(), text.end(), quoted), end; it != end; ++it) names.insert((*it)[1]);
    }
  }
  return names;
}
}  // namespace

TEST_CASE("Dashboards and alerts query only metrics that longhaul exports", "[monitoring]") {
  const auto exported = ExportedMetricNames();
  REQUIRE(exported.count("longhaul_rounds_committed_total") == 1);
  const fs::path root(LONGHAUL_SOURCE_DIR);
  const std::regex used("longhaul_[a-z0-9_]+");
  int checked = 0;
  for (const fs::path& file : {root / "monitoring/dashboards/longhaul-overview.json", root / "monitoring/prometheus/alerts.yml"}) {
    const std::string text = ReadFile(file);
    for (std::sregex_iterator it(text.begin(), text.end(), used), end; it != end; ++it) {
      std::string name = it->str();
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (name.ends_with(suffix) && !exported.count(name)) name.resize(name.size() - std::string(suffix).size());
      if (name == "longhaul_orchestrator" || name == "longhaul_overview" || name == "longhaul_") continue;  // job/uid names
      INFO(file << ": " << name);
      REQUIRE(exported.count(name) == 1);
      ++checked;
    }
  }
  REQUIRE(checked >= 10);
}
