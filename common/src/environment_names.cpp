#include "longhaul/common/environment_names.h"

#include <array>

namespace longhaul {

bool IsEnvironmentName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (!(letter || (i > 0 && c >= '0' && c <= '9'))) return false;
  }
  return true;
}

bool IsReservedEnvironmentName(std::string_view name) {
  static constexpr std::array<std::string_view, 6> kTorchrun = {"RANK",        "WORLD_SIZE", "LOCAL_RANK",
                                                                "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  for (auto t : kTorchrun) {
    if (name == t) return true;
  }
  return name.substr(0, 9) == "LONGHAUL_";
}

bool IsLoaderEnvironmentName(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kLoader = {
      "GCONV_PATH",  "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONBREAKPOINT", "BASH_ENV",
      "ENV",         "PERL5OPT",      "PERL5LIB",   "NODE_OPTIONS",  "RUBYOPT",          "LOCPATH"};
  for (auto l : kLoader) {
    if (name == l) return true;
  }
  return name.substr(0, 3) == "LD_";
}

}  // namespace longhaul
