// The relay behind LinkEmulator: one acceptor thread; per connection and
// direction a reader thread (stamps each read with its release time) and a writer
// thread (waits for the release time, then for the direction's LinkPacer).
#include "longhaul/wan_transport/link_emulator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "link_pacer.h"

namespace longhaul::wan_transport {
namespace {

using Clock = std::chrono::steady_clock;

// A direction's LinkPacer, shared by its writer threads: Take waits until the
// bytes may be sent.
class SharedPacer {
 public:
  explicit SharedPacer(double rate) : pacer_(rate, Clock::now()) {}
  void SetRate(double rate) {
    std::lock_guard lock(mu_);
    pacer_.SetRate(rate);
  }
  void Take(size_t bytes, Clock::time_point ready) {
    Clock::time_point at;
    {
      std::lock_guard lock(mu_);
      at = pacer_.Take(bytes, ready, Clock::now());
    }
    std::this_thread::sleep_until(at);
  }

 private:
  std::mutex mu_;
  LinkPacer pacer_;
};

struct Segment {
  std::vector<char> bytes;  // empty = end of stream
  Clock::time_point release;
};

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Status ParseHostPort(const std::string& text, std::string* host, int* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return InvalidArgument("'" + text + "' is not HOST:PORT");
  std::string h = text.substr(0, colon), p = text.substr(colon + 1);
  if (h == "localhost") h = "127.0.0.1";
  in_addr addr{};
  if (::inet_pton(AF_INET, h.c_str(), &addr) != 1) return InvalidArgument("'" + text + "': host must be an IPv4 address");
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 65535) {
    return InvalidArgument("'" + text + "': port must be 0-65535");
  }
  *host = h;
  *port = std::stoi(p);
  return Status::Ok();
}

Status LinkShape::Validate() const {
  if (!(rate_bytes_per_second >= 0) || !std::isfinite(rate_bytes_per_second)) return InvalidArgument("rate must be >= 0");
  if (delay.count() < 0 || jitter.count() < 0) return InvalidArgument("delay and jitter must be >= 0");
  if (jitter > delay) return InvalidArgument("jitter must not exceed delay");
  return Status::Ok();
}

std::string LinkShape::ToString() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "rate-mbit=%g delay-ms=%g jitter-ms=%g", rate_bytes_per_second * 8 / 1e6,
                static_cast<double>(delay.count()) / 1e3, static_cast<double>(jitter.count()) / 1e3);
  return buf;
}

namespace {

// One "key=value" of a control text, applied to `shape`.
Status ApplyLinkSetting(const std::string& item, LinkShape& shape) {
  const auto eq = item.find('=');
  if (eq == std::string::npos) return InvalidArgument("'" + item + "' is not key=value");
  const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
  double v = 0;
  size_t used = 0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !std::isfinite(v) || v < 0 || v > 1e6) {
    return InvalidArgument(key + ": '" + value + "' is not a number in 0..1e6");
  }
  const auto micros = std::chrono::microseconds(static_cast<long>(v * 1000));
  if (key == "rate-mbit") shape.rate_bytes_per_second = v * 1e6 / 8;
  else if (key == "delay-ms") shape.delay = micros;
  else if (key == "jitter-ms") shape.jitter = micros;
  else return InvalidArgument("unknown setting '" + key + "' (rate-mbit, delay-ms, jitter-ms)");
  return Status::Ok();
}

}  // namespace

Result<LinkShape> ParseLinkControl(const std::string& text, const LinkShape& current) {
  LinkShape shape = current;
  std::istringstream lines(text);
  std::string line, item;
  while (std::getline(lines, line)) {
    std::istringstream items(line.substr(0, line.find('#')));  // '#' comments to the line's end
    while (items >> item) LONGHAUL_RETURN_IF_ERROR(ApplyLinkSetting(item, shape));
  }
  LONGHAUL_RETURN_IF_ERROR(shape.Validate());
  return shape;
}

class LinkEmulator::Impl {
 public:
  explicit Impl(LinkEmulatorOptions o)
      : opt_(std::move(o)),
        shape_{opt_.rate_bytes_per_second, opt_.delay, opt_.jitter},
        up_(opt_.rate_bytes_per_second),
        down_(opt_.rate_bytes_per_second) {}
  ~Impl() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    std::list<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    queue_cv_.notify_all();
    for (auto& t : threads) t.join();
    for (int fd : fds_) ::close(fd);
  }

  Status Start() {
    std::string host;
    int port = 0;
    LONGHAUL_RETURN_IF_ERROR(ParseHostPort(opt_.listen, &host, &port).WithContext("--listen"));
    LONGHAUL_RETURN_IF_ERROR(ParseHostPort(opt_.forward, &fwd_host_, &fwd_port_).WithContext("--forward"));
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 128) != 0) {
      return Unavailable("cannot listen on " + opt_.listen + ": " + std::strerror(errno));
    }
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    address_ = host + ":" + std::to_string(ntohs(a.sin_port));
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
    return Status::Ok();
  }

  void Reshape(const LinkShape& shape) {
    {
      std::lock_guard lock(shape_mu_);
      shape_ = shape;
    }
    up_.SetRate(shape.rate_bytes_per_second);
    down_.SetRate(shape.rate_bytes_per_second);
  }
  LinkShape shape() const {
    std::lock_guard lock(shape_mu_);
    return shape_;
  }

  LinkEmulatorOptions opt_;
  std::string address_;
  int port_ = 0;
  std::atomic<uint64_t> accepted_{0};

 private:
  // One direction of one connection.
  struct Pipe {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Segment> q;
    size_t queued = 0;
    bool closed = false;
    Clock::time_point last_release{};
  };

  static size_t QueueLimit(const LinkShape& shape) {
    double delay_s = std::chrono::duration<double>(shape.delay + shape.jitter).count();
    if (shape.rate_bytes_per_second <= 0) return size_t{32} << 20;
    return static_cast<size_t>(shape.rate_bytes_per_second * delay_s * 1.5) + (size_t{1} << 20);
  }

  int ConnectForward() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(fwd_port_));
    ::inet_pton(AF_INET, fwd_host_.c_str(), &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      spdlog::warn("linkem: cannot connect to {}:{}: {}", fwd_host_, fwd_port_, std::strerror(errno));
      ::close(fd);
      return -1;
    }
    return fd;
  }

  void Accept() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int in = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0) continue;
      int out = ConnectForward();
      if (out < 0) {
        ::close(in);
        continue;
      }
      int one = 1;
      ::setsockopt(in, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(out, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ++accepted_;
      std::lock_guard lock(mu_);
      fds_.push_back(in);
      fds_.push_back(out);
      auto up = std::make_shared<Pipe>(), down = std::make_shared<Pipe>();
      threads_.emplace_back([this, in, up] { Read(in, *up); });
      threads_.emplace_back([this, out, up] { Write(out, *up, up_); });
      threads_.emplace_back([this, out, down] { Read(out, *down); });
      threads_.emplace_back([this, in, down] { Write(in, *down, down_); });
    }
  }

  void Read(int fd, Pipe& pipe) {
    std::mt19937_64 rng(std::random_device{}());
    std::vector<char> buf(64 << 10);
    while (!stop_) {
      const LinkShape now_shape = shape();
      const size_t limit = QueueLimit(now_shape);
      {
        std::unique_lock lock(pipe.mu);
        while (!pipe.cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return pipe.queued < limit || pipe.closed || stop_.load(); })) {
        }
        if (pipe.closed || stop_) break;
      }
      ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      auto now = Clock::now();
      const LinkShape at = shape();  // the shape when these bytes entered the link
      std::uniform_int_distribution<long> jitter(-at.jitter.count(), at.jitter.count());
      std::lock_guard lock(pipe.mu);
      Segment s;
      if (n > 0) s.bytes.assign(buf.data(), buf.data() + n);
      // Jittered release times never go backwards: bytes of a stream stay in order.
      s.release = std::max(pipe.last_release, now + at.delay + std::chrono::microseconds(jitter(rng)));
      pipe.last_release = s.release;
      pipe.queued += s.bytes.size();
      pipe.q.push_back(std::move(s));
      pipe.cv.notify_all();
      if (n <= 0) break;  // EOF or error: the writer forwards the end
    }
  }

  void Write(int fd, Pipe& pipe, SharedPacer& pacer) {
    while (!stop_) {
      Segment s;
      {
        std::unique_lock lock(pipe.mu);
        pipe.cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !pipe.q.empty() || pipe.closed; });
        if (pipe.q.empty()) {
          if (pipe.closed) break;
          continue;
        }
        s = std::move(pipe.q.front());
        pipe.q.pop_front();
      }
      std::this_thread::sleep_until(s.release);
      bool ok = !s.bytes.empty();
      for (size_t off = 0; ok && off < s.bytes.size(); off += 16384) {
        size_t n = std::min<size_t>(16384, s.bytes.size() - off);
        // The whole segment could leave from its release on: time this thread
        // lost since (woken late, preempted while writing) is made up (LinkPacer).
        pacer.Take(n, s.release);
        ok = WriteAll(fd, s.bytes.data() + off, n);
      }
      {
        std::lock_guard lock(pipe.mu);
        pipe.queued -= s.bytes.size();
        if (!ok) pipe.closed = true;
        pipe.cv.notify_all();
      }
      if (!ok) {
        ::shutdown(fd, SHUT_WR);  // pass the end of stream (or the failure) on
        break;
      }
    }
  }

  std::string fwd_host_;
  int fwd_port_ = 0;
  int listen_fd_ = -1;
  mutable std::mutex shape_mu_;
  LinkShape shape_;  // guarded by shape_mu_
  SharedPacer up_, down_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::list<std::thread> threads_;
  std::condition_variable queue_cv_;
};

LinkEmulator::LinkEmulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LinkEmulator::~LinkEmulator() = default;

Result<std::unique_ptr<LinkEmulator>> LinkEmulator::Start(const LinkEmulatorOptions& options) {
  const LinkShape shape{options.rate_bytes_per_second, options.delay, options.jitter};
  LONGHAUL_RETURN_IF_ERROR(shape.Validate());
  auto impl = std::make_unique<Impl>(options);
  LONGHAUL_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<LinkEmulator>(new LinkEmulator(std::move(impl)));
}

std::string LinkEmulator::listen_address() const { return impl_->address_; }
int LinkEmulator::port() const { return impl_->port_; }
uint64_t LinkEmulator::connections_accepted() const { return impl_->accepted_.load(); }

Status LinkEmulator::Reshape(const LinkShape& shape) {
  LONGHAUL_RETURN_IF_ERROR(shape.Validate());
  impl_->Reshape(shape);
  return Status::Ok();
}

LinkShape LinkEmulator::shape() const { return impl_->shape(); }

}  // namespace longhaul::wan_transport
