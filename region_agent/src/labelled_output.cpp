#include "longhaul/region_agent/labelled_output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include <spdlog/spdlog.h>

#include "longhaul/region_agent/child_process.h"
#include "longhaul/region_agent/worker_launcher.h"

namespace longhaul::region_agent {
namespace {

// A line longer than this is written in pieces (a task printing without newlines).
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

std::optional<std::pair<int, std::string_view>> SplitTaskLabel(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const size_t first_digit = i;
  int task = 0;
  while (i < line.size() && i - first_digit < 7 && line[i] >= '0' && line[i] <= '9') task = task * 10 + (line[i++] - '0');
  if (i == first_digit || i >= line.size() || line[i] != ':') return std::nullopt;
  ++i;
  if (i < line.size() && line[i] == ' ') ++i;
  return std::make_pair(task, line.substr(i));
}

Result<std::unique_ptr<LabelledOutput>> LabelledOutput::Start(int read_fd, std::filesystem::path dir, int tasks) {
  std::unique_ptr<LabelledOutput> out(new LabelledOutput());
  out->fd_ = read_fd;
  out->dir_ = std::move(dir);
  out->tasks_ = tasks;
  out->reader_ = std::thread([p = out.get()] { p->Run(); });
  return out;
}

LabelledOutput::~LabelledOutput() {
  stop_ = true;
  if (reader_.joinable()) reader_.join();
  for (const auto& [task, fd] : files_) {
    if (fd >= 0) ::close(fd);
  }
  if (fd_ >= 0) ::close(fd_);
}

bool LabelledOutput::WaitDrained(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_cv_.wait_until(lock, deadline, [this] { return drained_; });
}

std::string LabelledOutput::SlurmReason() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (srun_error_.empty() || step_notice_.empty()) return srun_error_ + step_notice_;
  return srun_error_ + "; " + step_notice_;
}

void LabelledOutput::Write(std::string_view line) {
  int task = -1;
  std::string_view text = line;
  if (continues_) {
    task = *continues_;  // the rest of a line cut at kMaxLine: no label of its own
  } else if (auto labelled = SplitTaskLabel(line); labelled && labelled->first < tasks_) {
    task = labelled->first;
    text = labelled->second;
  }
  continues_ = line.empty() || line.back() != '\n' ? std::optional<int>(task) : std::nullopt;
  std::string_view words = text;
  while (!words.empty() && (words.back() == '\n' || words.back() == '\r')) words.remove_suffix(1);
  if (task < 0 && words.rfind("srun: error: ", 0) == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    srun_error_ = std::string(words.substr(6));
  }
  if (words.rfind("slurmstepd", 0) == 0) {
    const auto open = words.find("*** ");
    const auto close = words.rfind(" ***");
    if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
      std::lock_guard<std::mutex> lock(mu_);
      step_notice_ = std::string(words.substr(open + 4, close - open - 4));
    }
    if (task >= 0) Append(-1, text);  // Slurm's words, where srun's own are
  }
  Append(task, text);
}

void LabelledOutput::Append(int task, std::string_view text) {
  auto it = files_.find(task);
  if (it == files_.end()) {
    auto fd = OpenLogFile(task < 0 ? SrunLogPath(dir_) : WorkerLogPath(dir_, task));
    if (!fd.ok()) spdlog::warn("{}", fd.status().message());  // and the task's lines are dropped
    it = files_.emplace(task, fd.ok() ? *fd : -1).first;
  }
  if (it->second < 0) return;
  while (!text.empty()) {
    const ssize_t n = ::write(it->second, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void LabelledOutput::Run() {
  std::string pending;
  char buffer[16 * 1024];
  bool open = true;
  // Until EOF (every writer gone), or until stopped (the destructor: srun may
  // still be running then, and what it writes later is not wanted).
  while (open && !stop_) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready <= 0) continue;  // nothing yet (or EINTR): check stop_ again
    const ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      open = false;
    } else {
      pending.append(buffer, static_cast<size_t>(n));
    }
    size_t begin = 0;
    for (size_t end; (end = pending.find('\n', begin)) != std::string::npos; begin = end + 1) {
      Write(std::string_view(pending).substr(begin, end + 1 - begin));
    }
    pending.erase(0, begin);
    if (pending.size() >= kMaxLine || (!open && !pending.empty())) {
      Write(pending);
      pending.clear();
    }
  }
  if (!pending.empty()) Write(pending);  // stopped mid-line
  // A last line without its newline ends here: the next launch's output,
  // appended to the same files, starts on a line of its own.
  if (continues_) {
    Append(*continues_, "\n");
    continues_.reset();
  }
  std::lock_guard<std::mutex> lock(mu_);
  drained_ = true;
  drained_cv_.notify_all();
}

}  // namespace longhaul::region_agent
