#include "longhaul/orchestrator/endpoint_file.h"

#include <fstream>
#include <sstream>
#include <thread>

namespace longhaul::orchestrator {

Status WriteEndpointFile(const std::filesystem::path& file, const EndpointInfo& info) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return Unavailable("cannot write endpoint file '" + tmp.string() + "'");
    out << "control=" << info.control << "\nmetrics=" << info.metrics << "\n";
    if (!info.public_key.empty()) out << "public_key=" << info.public_key << "\n";
    if (!out.flush()) return Unavailable("cannot write endpoint file '" + tmp.string() + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) return Unavailable("cannot rename '" + tmp.string() + "' to '" + file.string() + "': " + ec.message());
  return Status::Ok();
}

Result<EndpointInfo> ReadEndpointFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return NotFound("no endpoint file '" + file.string() + "'");
  EndpointInfo info;
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "control") info.control = value;
    else if (key == "metrics") info.metrics = value;
    else if (key == "public_key") info.public_key = value;
  }
  if (info.control.empty()) return DataLoss("endpoint file '" + file.string() + "' has no control= line");
  return info;
}

Result<EndpointInfo> WaitForEndpointFile(const std::filesystem::path& file, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto info = ReadEndpointFile(file);
    if (info.ok()) return info;
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded("endpoint file '" + file.string() + "' did not appear within " +
                              std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace longhaul::orchestrator
