#include "longhaul/orchestrator/state_file_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace longhaul::orchestrator {
namespace {

constexpr uint32_t kWalMagicLittle = 0x377f0682;  // checksums over little-endian words
constexpr uint32_t kWalMagicBig = 0x377f0683;
constexpr size_t kWalHeader = 32, kFrameHeader = 24;

uint32_t Big32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// SQLite's WAL checksum (wal.c walChecksumBytes): over 8-byte chunks, two
// running sums, words read in the byte order the magic number names.
void Checksum(bool big, const unsigned char* p, size_t n, uint32_t& s0, uint32_t& s1) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint32_t a, b;
    if (big) {
      a = Big32(p + i);
      b = Big32(p + i + 4);
    } else {
      std::memcpy(&a, p + i, 4);
      std::memcpy(&b, p + i + 4, 4);
    }
    s0 += a + s1;
    s1 += b + s0;
  }
}

}  // namespace

Result<std::unique_ptr<StateFileLock>> StateFileLock::Acquire(const std::filesystem::path& state_file, bool create) {
  std::error_code ec;
  // Symlinks resolved: the pid file sits beside the file itself.
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(state_file, ec);
  const std::filesystem::path file = ec ? state_file : resolved;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0 && errno == ENOENT) {
    return FailedPrecondition("state file " + state_file.string() +
                              " does not exist: refusing to start as an orchestrator with no jobs; pass --init to "
                              "create a new state file");
  }
  if (fd < 0) return Unavailable("cannot open state file " + file.string() + ": " + std::strerror(errno));
  const std::string pid_path = file.string() + ".lock";
  // The lock is the state file's own (its inode), whatever path named it.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    std::ifstream in(pid_path);
    std::string holder;
    in >> holder;
    return FailedPrecondition("state file " + state_file.string() + " is in use by another orchestrator (pid " +
                              (holder.empty() ? std::string("unknown") : holder) + ", see " + pid_path + ")");
  }
  // For the message above only: the lock holds whatever becomes of this file.
  std::ofstream(pid_path, std::ios::trunc) << ::getpid() << "\n";
  return std::unique_ptr<StateFileLock>(new StateFileLock(fd));
}

StateFileLock::~StateFileLock() { ::close(fd_); }

Status CheckWalFrames(std::string_view wal, const std::string& name) {
  if (wal.empty()) return Status::Ok();
  if (wal.size() < kWalHeader) return Status::Ok();  // a header torn by a crash: SQLite ignores the WAL
  const auto* p = reinterpret_cast<const unsigned char*>(wal.data());
  const uint32_t magic = Big32(p);
  if (magic != kWalMagicLittle && magic != kWalMagicBig) {
    return DataLoss(name + " is not a SQLite WAL (bad magic); refusing to start on a damaged state file");
  }
  const bool big = magic == kWalMagicBig;
  const uint32_t page = Big32(p + 8);
  uint32_t s0 = 0, s1 = 0;
  Checksum(big, p, 24, s0, s1);
  if (s0 != Big32(p + 24) || s1 != Big32(p + 28)) return Status::Ok();  // header invalid: WAL ignored, nothing lost
  const uint32_t salt1 = Big32(p + 16), salt2 = Big32(p + 20);
  const size_t frame = kFrameHeader + page;
  if (page < 512 || page > 65536) return DataLoss(name + ": WAL header names page size " + std::to_string(page));
  size_t good = 0, off = kWalHeader;
  for (; off + frame <= wal.size(); off += frame, ++good) {
    const unsigned char* f = p + off;
    if (Big32(f + 8) != salt1 || Big32(f + 12) != salt2) break;  // an older generation: the log ends here
    Checksum(big, f, 8, s0, s1);
    Checksum(big, f + kFrameHeader, page, s0, s1);
    if (s0 != Big32(f + 16) || s1 != Big32(f + 20)) break;
  }
  // Frames after the first bad one that still carry this generation's salts
  // were written after it: the log was damaged in the middle, and SQLite would
  // silently drop them (acknowledged commits among them).
  size_t later = 0;
  for (size_t o = off + frame; o + frame <= wal.size(); o += frame) {
    if (Big32(p + o + 8) == salt1 && Big32(p + o + 12) == salt2) ++later;
  }
  if (later > 0) {
    return DataLoss(name + " is damaged: WAL frame " + std::to_string(good + 1) + " fails its checksum and " +
                    std::to_string(later) + " later frame(s) of the same log would be dropped; refusing to start " +
                    "(restore the state file from a backup, or move it away and start with --init)");
  }
  return Status::Ok();
}

Status CheckStateFileBeforeOpen(const std::filesystem::path& state_file, bool init) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(state_file, ec);
  if (exists && !std::filesystem::is_regular_file(state_file, ec)) {
    return InvalidArgument("state file " + state_file.string() + " is not a regular file");
  }
  const auto size = exists ? std::filesystem::file_size(state_file, ec) : 0;
  if ((!exists || size == 0) && !init) {
    return FailedPrecondition("state file " + state_file.string() + (exists ? " is empty (0 bytes)" : " does not exist") +
                              ": refusing to start as an orchestrator with no jobs; pass --init to create a new state file");
  }
  const std::filesystem::path wal = state_file.string() + "-wal";
  if (std::filesystem::exists(wal, ec)) {
    std::ifstream in(wal, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    LONGHAUL_RETURN_IF_ERROR(CheckWalFrames(bytes.str(), wal.string()));
  }
  return Status::Ok();
}

}  // namespace longhaul::orchestrator
