// Test and benchmark helpers for /metrics: a plain HTTP request with a bound,
// and IdleCrowd, a bounded helper thread that holds idle TCP connections open
// and reopens each one the server drops (a port scanner, a stuck proxy, a
// load balancer's health checks: what the issue saw). Header-only, so
// bench/monitoring uses it too (tests/ is on longhaul_test_support's include path).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace longhaul::testing {

struct HttpReply {
  int status = 0;
  std::string headers;  // the status line and header lines
  std::string body;
  double seconds = 0;  // from connect to the end of the response
};

// Splits a raw response; nullopt when it is not HTTP/1.x.
inline std::optional<HttpReply> ParseHttpReply(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos || raw.size() < 12) return std::nullopt;
  HttpReply r;
  r.status = std::atoi(raw.substr(9, 3).c_str());
  r.headers = raw.substr(0, end + 2);
  r.body = raw.substr(end + 4);
  return r;
}

// Connects to 127.0.0.1:port, or -1. A connect that cannot finish in `timeout` fails.
inline int ConnectLoopback(int port, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() too
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` verbatim and reads until the server closes, all within
// `timeout`; nullopt on a connect/IO failure, a timeout or a non-HTTP answer.
inline std::optional<HttpReply> RawHttp(int port, const std::string& request,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + timeout;
  const int fd = ConnectLoopback(port, timeout);
  if (fd < 0) return std::nullopt;
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (431) before reading everything
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::close(fd);
      return std::nullopt;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
      continue;
    }
    break;  // EOF (or a reset after a complete answer)
  }
  ::close(fd);
  auto reply = ParseHttpReply(raw);
  if (reply) reply->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return reply;
}

inline std::optional<HttpReply> Scrape(int port, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return RawHttp(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n", timeout);
}

// `count` idle connections to 127.0.0.1:port that never send a byte. With
// `reopen`, each one the server closes is opened again at once. The helper
// thread stops by itself after `max_duration`, or at Stop()/destruction, and
// closes every connection.
class IdleCrowd {
 public:
  IdleCrowd(int port, size_t count, bool reopen, std::chrono::milliseconds max_duration)
      : port_(port), count_(count), reopen_(reopen), until_(std::chrono::steady_clock::now() + max_duration) {
    running_ = true;  // before the thread starts: a waiter never sees it "ended" before it began
    thread_ = std::thread([this] { Run(); });
  }
  ~IdleCrowd() { Stop(); }
  IdleCrowd(const IdleCrowd&) = delete;
  IdleCrowd& operator=(const IdleCrowd&) = delete;

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  size_t open() const { return open_.load(); }
  size_t reopened() const { return reopened_.load(); }
  size_t dropped() const { return dropped_.load(); }
  bool running() const { return running_.load(); }

  // Waits (bounded) until `pred(*this)` holds; false on timeout.
  template <typename Pred>
  bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(*this); });
  }

 private:
  void Notify() {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }

  void Run() {
    std::vector<int> fds(count_, -1);
    const auto open_one = [&](int& fd) {
      fd = ConnectLoopback(port_, std::chrono::milliseconds(1000));
      if (fd >= 0) ++open_;
    };
    for (int& fd : fds) {
      if (stop_ || std::chrono::steady_clock::now() >= until_) break;
      open_one(fd);
    }
    Notify();
    std::vector<pollfd> polls;
    std::vector<size_t> index;
    while (!stop_ && std::chrono::steady_clock::now() < until_) {
      polls.clear();
      index.clear();
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i] < 0) continue;
        polls.push_back({fds[i], POLLIN, 0});
        index.push_back(i);
      }
      // Waits for the server to close one (bounded, to see stop_ and until_).
      const int n = polls.empty() ? 0 : ::poll(polls.data(), polls.size(), 20);
      if (polls.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      bool changed = false;
      for (size_t k = 0; n > 0 && k < polls.size(); ++k) {
        if (polls[k].revents == 0) continue;
        char c;
        if (::recv(polls[k].fd, &c, 1, MSG_DONTWAIT) > 0) continue;  // data: not expected, stay
        ::close(polls[k].fd);
        fds[index[k]] = -1;
        --open_;
        ++dropped_;
        changed = true;
      }
      if (reopen_) {
        for (int& fd : fds) {
          if (fd >= 0 || stop_) continue;
          open_one(fd);
          if (fd >= 0) ++reopened_;
          changed = true;
        }
      }
      if (changed) Notify();
    }
    for (int& fd : fds)
      if (fd >= 0) ::close(fd);
    open_ = 0;
    running_ = false;
    Notify();
  }

  const int port_;
  const size_t count_;
  const bool reopen_;
  const std::chrono::steady_clock::time_point until_;
  std::atomic<bool> stop_{false}, running_{false};
  std::atomic<size_t> open_{0}, reopened_{0}, dropped_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace longhaul::testing
