#include "longhaul/region_agent/run_as.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <vector>

namespace longhaul::region_agent {
namespace {

std::optional<uint32_t> Number(const std::string& s) {
  uint32_t v = 0;
  const char* end = s.data() + s.size();
  if (s.empty() || std::from_chars(s.data(), end, v).ptr != end) return std::nullopt;
  return v;
}

}  // namespace

Result<RunAs> ParseRunAs(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string user = spec.substr(0, colon);
  const std::string group = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (user.empty() || (colon != std::string::npos && group.empty())) {
    return InvalidArgument("--run-as '" + spec + "' must be USER or USER:GROUP (names or numbers)");
  }
  RunAs out;
  out.spec = spec;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (auto n = Number(user)) {
    out.uid = *n;
    if (::getpwuid_r(*n, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) out.gid = pw.pw_gid;
    else if (group.empty()) return InvalidArgument("--run-as '" + spec + "': uid " + user + " has no user entry, so give the group too (UID:GID)");
  } else {
    if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return InvalidArgument("--run-as '" + spec + "': no user named '" + user + "'");
    }
    out.uid = pw.pw_uid;
    out.gid = pw.pw_gid;
  }
  if (!group.empty()) {
    if (auto n = Number(group)) {
      out.gid = *n;
    } else {
      ::group gr{};
      ::group* g = nullptr;
      if (::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &g) != 0 || g == nullptr) {
        return InvalidArgument("--run-as '" + spec + "': no group named '" + group + "'");
      }
      out.gid = gr.gr_gid;
    }
  }
  if (out.uid == 0 || out.gid == 0) {
    return InvalidArgument("--run-as '" + spec + "' names root (uid or gid 0): workers must run as an unprivileged user");
  }
  return out;
}

Status CheckCanSwitchUser(const RunAs& who) {
  if (::geteuid() != 0) {
    return FailedPrecondition("--run-as " + who.spec + " needs the agent to start as root (it switches each worker to that "
                              "user before exec); this agent runs as uid " + std::to_string(::geteuid()));
  }
  return Status::Ok();
}

Status HandOver(const std::filesystem::path& path, const RunAs& who, mode_t mode) {
  if (::fchownat(AT_FDCWD, path.c_str(), who.uid, who.gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return Unavailable("cannot give " + path.string() + " to " + who.spec + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) {
    return Unavailable("cannot set the mode of " + path.string() + ": it vanished or is a symbolic link");
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return Unavailable("cannot set the mode of " + path.string() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace longhaul::region_agent
