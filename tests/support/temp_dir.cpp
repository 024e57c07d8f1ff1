#include "support/temp_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace longhaul::testing {

TempDir::TempDir(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("longhaul-test-" + tag + "-XXXXXX")).string();
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
