#include "support/temp_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace longhaul::testing {

std::string SuiteTag(const std::string& build_dir) {
  uint32_t h = 2166136261u;  // FNV-1a: stable across processes and builds
  for (unsigned char c : build_dir) h = (h ^ c) * 16777619u;
  char out[16];
  std::snprintf(out, sizeof out, "s%08x", h);
  return out;
}

std::string RunningSuiteTag() {
  const char* suite = std::getenv("LONGHAUL_TEST_SUITE");
  return suite != nullptr && *suite != '\0' ? SuiteTag(suite) : std::string();
}

TempDir::TempDir(const std::string& tag) {
  const std::string suite = RunningSuiteTag();
  const std::string name = "longhaul-test-" + (suite.empty() ? "" : suite + "-") + tag + "-XXXXXX";
  std::string templ = (std::filesystem::temp_directory_path() / name).string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp " + templ + ": " + std::strerror(errno));
  path_ = templ;
}

TempDir::~TempDir() {
  if (std::getenv("LONGHAUL_KEEP_TEST_DIRS")) {
    std::fprintf(stderr, "kept %s (LONGHAUL_KEEP_TEST_DIRS)\n", path_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) std::fprintf(stderr, "cannot remove %s: %s\n", path_.c_str(), ec.message().c_str());
}

}  // namespace longhaul::testing
