// StateFileGuard: what must hold before the orchestrator trusts its state file.
//
// The state file is the only record of acknowledged jobs. An orchestrator that
// started "fresh" on a truncated file, or on a WAL whose middle was damaged
// (SQLite silently drops every frame after the first bad checksum), would lose
// acknowledged jobs without a word; two orchestrators on one file would corrupt
// each other's view. So:
//  - one orchestrator per file: an exclusive flock on the state file itself
//    (its inode: a symlink or another hard link to it finds it held; no lock
//    file to delete), held for the process's life; <resolved path>.lock holds
//    the owner's pid, for the message only;
//  - a missing or empty file is created only when asked (--init);
//  - a WAL with a bad frame followed by valid-looking frames of the same
//    generation is damage, not a torn last write: refused.
// The store itself then refuses a file without longhaul's schema or failing
// SQLite's quick_check (StateStore::Open with create = false).
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>

#include "longhaul/common/status.h"

namespace longhaul::orchestrator {

class StateFileLock {
 public:
  // kFailedPrecondition naming the holder's pid when another process holds it,
  // or when the file does not exist and `create` is false (--init).
  static Result<std::unique_ptr<StateFileLock>> Acquire(const std::filesystem::path& state_file, bool create);
  ~StateFileLock();

 private:
  explicit StateFileLock(int fd) : fd_(fd) {}
  int fd_;
};

// Before opening: a missing or empty file needs `init`; the WAL (if any) must
// not be damaged in the middle.
Status CheckStateFileBeforeOpen(const std::filesystem::path& state_file, bool init);

// The WAL format check on the file's bytes (exposed for tests): ok for an
// empty or intact WAL and for one whose only damage is its last frames.
Status CheckWalFrames(std::string_view wal, const std::string& name);

}  // namespace longhaul::orchestrator
