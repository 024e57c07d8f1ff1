// Reading a job file: only a regular file, only up to the 1 MiB limit, so a
// FIFO, a device or a huge file is refused instead of hanging or exhausting memory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "job_spec_limits.h"
#include "longhaul/orchestrator/job_spec.h"

namespace longhaul::orchestrator {

Result<std::string> ReadJobFile(const std::filesystem::path& path) {
  const std::string name = "job file '" + path.string() + "'";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return NotFound("cannot read " + name + ": " + why);
    return InvalidArgument("cannot read " + name + ": " + why);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return InvalidArgument("cannot read " + name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a plain file";
    return InvalidArgument(name + " is " + kind + "; give a regular file");
  }
  const auto too_big = [&](const std::string& size) {
    return InvalidArgument("job file " + path.string() + " is " + size + " bytes; the limit is 1 MiB");
  };
  if (static_cast<uint64_t>(st.st_size) > spec_limits::kMaxJobFileBytes) return too_big(std::to_string(st.st_size));
  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(spec_limits::kMaxJobFileBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InvalidArgument("cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > spec_limits::kMaxJobFileBytes) return too_big("more than " + std::to_string(spec_limits::kMaxJobFileBytes));
  text.resize(got);
  return text;
}

Result<v1::JobSpec> LoadJobSpecFile(const std::filesystem::path& path) {
  LONGHAUL_ASSIGN_OR_RETURN(const std::string text, ReadJobFile(path));
  return ParseJobSpecYaml(text, path.filename().string());
}

}  // namespace longhaul::orchestrator
