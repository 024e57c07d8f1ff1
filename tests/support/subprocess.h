// Test support: start a real child process, read its output, stop it.
// Every wait is bounded; a Subprocess still running at destruction is killed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace longhaul::testing {

class Subprocess {
 public:
  // Starts argv[0] (a path) with stdout+stderr captured into `log_path`.
  static std::optional<Subprocess> Start(const std::vector<std::string>& argv, const std::string& log_path);
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Sends `signal` and waits up to `timeout` for exit; returns the wait status or -1.
  int Stop(int signal, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool Running();
  // Reads the log until a line containing `needle` appears; returns that line.
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) const;
  std::string Log() const;

 private:
  Subprocess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_ = -1;
  std::string log_path_;
};

// Plain HTTP/1.0 GET on 127.0.0.1; returns the body or nullopt on failure.
std::optional<std::string> HttpGet(int port, const std::string& path);

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace longhaul::testing
