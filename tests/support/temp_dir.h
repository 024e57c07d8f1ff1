// Test support: the one way tests and benchmarks make temporary folders.
// Every folder is /tmp/longhaul-test-[<suite>-]<tag>-XXXXXX, so the suite's
// leftover check (suite_leftovers) sees any that is not removed; <suite>
// (SuiteTag) names the build whose ctest run made it, so the check removes
// only its own.
#pragma once

#include <filesystem>
#include <string>

namespace longhaul::testing {

// A fresh folder, removed with its contents on destruction unless
// LONGHAUL_KEEP_TEST_DIRS is set (then its path is printed). Whoever writes
// into it (a process a test started) must be gone by then: declare the
// TempDir before the Subprocesses that use it.
// "s" + 8 hex digits naming a build folder; the tag of the running suite is
// that of $LONGHAUL_TEST_SUITE (ctest sets it), "" outside ctest.
std::string SuiteTag(const std::string& build_dir);
std::string RunningSuiteTag();

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "tmp");
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace longhaul::testing
