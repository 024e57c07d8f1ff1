// The deployment files start our binaries with flags (deploy/systemd's
// ExecStart lines, deploy/k8s's container commands): every flag they pass must
// be one the binary accepts, or an operator's unit fails at its first start
// after a flag is renamed.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/subprocess.h"

namespace fs = std::filesystem;
using namespace longhaul::testing;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;
const fs::path kDeploy = fs::path(LONGHAUL_SOURCE_DIR) / "deploy";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// binary name -> the flags a command line passes it ("--flag", without "=value").
using Invocations = std::multimap<std::string, std::string>;

// The binary is the command line's first word or the word after "exec".
void AddInvocation(const std::string& command_line, Invocations* out) {
  std::istringstream words(command_line);
  std::string binary, previous;
  for (std::string w; words >> w; previous = w) {
    const std::string name = fs::path(w).filename().string();
    if (binary.empty() && (previous.empty() || previous == "exec") &&
        std::regex_match(name, std::regex("longhaul(-[a-z]+)*"))) {
      binary = name;
    } else if (!binary.empty() && w.rfind("--", 0) == 0) {
      out->emplace(binary, w.substr(0, w.find('=')));
    }
  }
}

// systemd: ExecStart= with its backslash-continued lines.
Invocations FromUnit(const fs::path& unit) {
  std::string text = ReadFile(unit);
  for (size_t at; (at = text.find("\\\n")) != std::string::npos;) text.replace(at, 2, " ");
  Invocations out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("ExecStart=", 0) == 0) AddInvocation(line.substr(10), &out);
  return out;
}

// Kubernetes: every container's command and args, joined, of every document
// with a pod template (a Deployment or StatefulSet, not a Service).
Invocations FromManifest(const fs::path& manifest) {
  Invocations out;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(manifest.string())) {
    const YAML::Node spec = doc["spec"];
    if (!spec || !spec["template"]) continue;
    for (const auto& c : spec["template"]["spec"]["containers"]) {
      std::string line;
      for (const char* key : {"command", "args"})
        if (c[key])
          for (const auto& part : c[key]) line += part.as<std::string>() + " ";
      AddInvocation(line, &out);
    }
  }
  return out;
}

std::string Help(const std::string& binary) {
  std::string out;
  REQUIRE(RunCommand(kBin + "/" + binary + " --help", &out, std::chrono::seconds(30)) == 0);
  return out;
}

// "binary --flag" for each flag of `calls` that the binary's --help does not list.
std::vector<std::string> UnknownFlags(const Invocations& calls) {
  std::map<std::string, std::string> help;
  std::vector<std::string> unknown;
  for (const auto& [binary, flag] : calls) {
    INFO(binary << " " << flag);
    REQUIRE(fs::exists(kBin + "/" + binary));
    if (!help.count(binary)) help[binary] = Help(binary);
    const std::string& h = help[binary];
    // CLI11 lists "  --flag TYPE ..." or "  --flag" at a line's end.
    if (h.find(flag + " ") == std::string::npos && h.find(flag + "\n") == std::string::npos)
      unknown.push_back(binary + " " + flag);
  }
  return unknown;
}

void CheckFlags(const fs::path& file, const Invocations& calls) {
  INFO(file.string());
  CHECK(calls.size() >= 5);  // the file was understood: it passes flags
  CHECK(UnknownFlags(calls) == std::vector<std::string>{});
}

}  // namespace

TEST_CASE("deploy: every flag a systemd unit or Kubernetes manifest passes is one the binary accepts", "[deploy]") {
  int files = 0;
  for (const auto& e : fs::directory_iterator(kDeploy / "systemd")) {
    if (e.path().extension() != ".service") continue;
    CheckFlags(e.path(), FromUnit(e.path()));
    ++files;
  }
  for (const auto& e : fs::directory_iterator(kDeploy / "k8s")) {
    if (e.path().extension() != ".yaml") continue;
    CheckFlags(e.path(), FromManifest(e.path()));
    ++files;
  }
  CHECK(files == 5);
}

TEST_CASE("deploy: the flag check names a flag the binary does not accept", "[deploy]") {
  Invocations calls;
  AddInvocation("exec /usr/local/bin/longhaul-agent --region a --no-such-flag=1 --run-as longhaul-worker --key k",
                &calls);
  REQUIRE(calls.size() == 4);
  CHECK(UnknownFlags(calls) == std::vector<std::string>{"longhaul-agent --no-such-flag"});
}
