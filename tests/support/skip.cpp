#include "support/skip.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace longhaul::testing {

void SkipTest(const std::string& why) {
  std::printf("SKIPPED: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(kSkipReturnCode);
}

void SkipUnlessRoot(const std::string& what) {
  if (::geteuid() != 0) SkipTest(what + " needs root");
}

}  // namespace longhaul::testing
