#include "http_server.h"

#include <crypt.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace longhaul::monitoring {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLingerTimeout = std::chrono::seconds(2);  // reading what a client still sends after our response
constexpr size_t kMaxAcceptsPerWake = 128;                // then serve the connections already open
constexpr size_t kMaxPendingAuthChecks = 16;              // bcrypt checks queued; more are answered 503
constexpr size_t kAuthCacheEntries = 64;

// ---------------------------------------------------------------- OpenSSL bits

std::string OpenSslErrors() {
  std::string out;
  char buf[256];
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

int NeverPrompt(char*, int, int, void*) { return 0; }  // an encrypted key fails instead of asking a terminal

Result<SslCtxPtr> MakeTlsContext(const TlsServerConfig& tls) {
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return Internal("TLS: SSL_CTX_new: " + OpenSslErrors());
  const auto version = [](TlsVersion v) { return v == TlsVersion::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION; };
  if (SSL_CTX_set_min_proto_version(ctx.get(), version(tls.min_version)) != 1 ||
      (tls.max_version && SSL_CTX_set_max_proto_version(ctx.get(), version(*tls.max_version)) != 1))
    return Internal("TLS: setting the protocol versions: " + OpenSslErrors());
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx.get(),
                   SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_num_tickets(ctx.get(), 0);  // one request per connection: resumption tickets would be wasted
  SSL_CTX_set_default_passwd_cb(ctx.get(), NeverPrompt);
  const std::string cert = tls.cert_file.string(), key = tls.key_file.string();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1)
    return InvalidArgument("TLS certificate " + cert + " (tls_server_config.cert_file): " + OpenSslErrors());
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    return InvalidArgument("TLS private key " + key + " (tls_server_config.key_file)" +
                           (mismatch ? " does not match certificate " + cert : std::string()) + ": " + OpenSslErrors());
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return InvalidArgument("TLS private key " + key + " does not match certificate " + cert + ": " + OpenSslErrors());
  return ctx;
}

// ------------------------------------------------------------------- helpers

struct HostPort {
  std::string host;  // without brackets
  std::string port;
};

Result<HostPort> SplitHostPort(const std::string& address) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("metrics address '" + address + "' is not host:port (" + why + ")");
  };
  HostPort hp;
  size_t colon;
  if (!address.empty() && address[0] == '[') {  // [::1]:9100
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':')
      return bad("an IPv6 address is written [addr]:port");
    hp.host = address.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == std::string::npos) return bad("no port");
    hp.host = address.substr(0, colon);
    if (hp.host.find(':') != std::string::npos) return bad("an IPv6 address is written [addr]:port");
  }
  hp.port = address.substr(colon + 1);
  if (hp.host.empty()) return bad("no host");
  if (hp.port.empty() || hp.port.size() > 5 || hp.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(hp.port) > 65535)
    return bad("the port must be a number 0..65535");
  return hp;
}

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd = std::exchange(o.fd, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  void Reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

Result<Fd> Listen(const HostPort& hp, const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  if (const int rc = ::getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &list); rc != 0)
    return Unavailable("cannot serve metrics on " + address + ": resolving '" + hp.host + "': " + gai_strerror(rc));
  std::vector<const addrinfo*> candidates;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) candidates.push_back(ai);
  // IPv4 first: "localhost" then means 127.0.0.1, which every client reaches.
  std::stable_sort(candidates.begin(), candidates.end(), [](const addrinfo* a, const addrinfo* b) {
    return a->ai_family == AF_INET && b->ai_family != AF_INET;
  });
  std::string last_error = "no address";
  for (const addrinfo* ai : candidates) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.fd, SOMAXCONN) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    ::freeaddrinfo(list);
    return fd;
  }
  ::freeaddrinfo(list);
  return Unavailable("cannot serve metrics on " + address + ": " + last_error);
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

std::optional<std::string> Base64Decode(std::string_view s) {
  if (s.empty() || s.size() % 4 != 0) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '=') {
      if (i + 2 < s.size()) return std::nullopt;  // '=' only in the last two places
      ++pad;
      continue;
    }
    if (pad != 0) return std::nullopt;
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::string Serialize(const HttpResponse& r, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + Reason(r.status) +
                    "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\n" + r.extra_headers + "\r\n";
  if (!head) out += r.body;
  return out;
}

HttpResponse Plain(int status, std::string body, std::string extra_headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.extra_headers = std::move(extra_headers);
  return r;
}

struct Request {
  std::string method;
  std::string path;
  std::optional<std::string> authorization;
};

// Parses the request line and headers (everything before the blank line).
std::optional<Request> ParseRequest(std::string_view head) {
  Request req;
  const size_t eol = head.find('\n');
  std::string_view line = Trim(head.substr(0, eol));
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return std::nullopt;
  req.method = std::string(line.substr(0, sp1));
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (req.method.empty() || target.empty() || version.substr(0, 7) != "HTTP/1.") return std::nullopt;
  for (char c : req.method)
    if (c < 'A' || c > 'Z') return std::nullopt;
  for (const char* scheme : {"http://", "https://"}) {  // absolute-form: keep the path
    if (target.substr(0, std::strlen(scheme)) == scheme) {
      const size_t slash = target.find('/', std::strlen(scheme));
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  }
  if (target.front() != '/') return std::nullopt;
  req.path = std::string(target.substr(0, target.find_first_of("?#")));
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 1;
  while (pos < head.size()) {
    size_t next = head.find('\n', pos);
    if (next == std::string_view::npos) next = head.size();
    const std::string_view h = head.substr(pos, next - pos);
    pos = next + 1;
    if (Trim(h).empty()) continue;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    if (IEquals(h.substr(0, colon), "authorization")) req.authorization = std::string(Trim(h.substr(colon + 1)));
  }
  return req;
}

// "Basic dXNlcjpwYXNz" -> (user, password)
std::optional<std::pair<std::string, std::string>> ParseBasic(const std::string& value) {
  std::string_view v = Trim(value);
  if (v.size() < 6 || !IEquals(v.substr(0, 6), "basic ")) return std::nullopt;
  auto decoded = Base64Decode(Trim(v.substr(6)));
  if (!decoded) return std::nullopt;
  const size_t colon = decoded->find(':');
  if (colon == std::string::npos) {
    OPENSSL_cleanse(decoded->data(), decoded->size());
    return std::nullopt;
  }
  std::pair<std::string, std::string> out(decoded->substr(0, colon), decoded->substr(colon + 1));
  OPENSSL_cleanse(decoded->data(), decoded->size());
  return out;
}

void Cleanse(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

using Digest = std::array<unsigned char, 32>;

}  // namespace

// ------------------------------------------------------------------ the server

struct HttpServer::Impl {
  enum class Phase { kHandshake, kReading, kAuthPending, kWriting, kDraining };

  struct Connection {
    uint64_t id = 0;
    int fd = -1;
    SSL* ssl = nullptr;
    Phase phase = Phase::kReading;
    Clock::time_point deadline;
    short events = POLLIN;
    std::string in;
    std::string out;
    size_t written = 0;
    Request request;  // while an auth check is pending
  };

  struct AuthJob {
    uint64_t id;
    std::string user, password, hash;
    bool known_user;
    Digest key;
  };
  struct AuthResult {
    uint64_t id;
    bool ok;
    Digest key;
  };

  HttpServerOptions options;
  HttpHandler handler;
  SslCtxPtr tls;
  Fd listener, wake, spare;
  int port = 0;
  std::atomic<bool> stop{false};
  std::thread loop_thread;

  // Owned by the loop thread. Ids grow with accept order, so the map iterates
  // oldest first.
  std::map<uint64_t, Connection> connections;
  uint64_t next_id = 1;
  std::vector<Digest> auth_cache;  // credentials that passed, as HMAC-SHA-256 digests
  size_t auth_cache_next = 0;
  std::array<unsigned char, 32> hmac_key{};
  size_t auth_pending = 0;  // checks handed to the helper whose result has not come back

  // The bcrypt helper thread and its queues.
  std::mutex auth_mu;
  std::condition_variable auth_cv;
  std::deque<AuthJob> auth_jobs;
  std::vector<AuthResult> auth_results;
  bool auth_stop = false;
  std::thread auth_thread;

  ~Impl() {
    stop = true;
    Wake();
    if (loop_thread.joinable()) loop_thread.join();
    {
      std::lock_guard<std::mutex> lock(auth_mu);
      auth_stop = true;
      for (AuthJob& job : auth_jobs) Cleanse(job.password);
      auth_jobs.clear();
    }
    auth_cv.notify_all();
    if (auth_thread.joinable()) auth_thread.join();
    while (!connections.empty()) Close(connections.begin()->first);
  }

  void Wake() {
    if (wake.fd < 0) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake.fd, &one, sizeof one);
  }

  // ------------------------------------------------------------ the loop

  void Run() {
    sigset_t pipe_signal;  // writes to a peer that went away fail with EPIPE instead
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    while (!stop.load()) {
      fds.clear();
      ids.clear();
      fds.push_back({wake.fd, POLLIN, 0});
      fds.push_back({listener.fd, POLLIN, 0});
      Clock::time_point next_deadline = Clock::now() + std::chrono::seconds(1);
      for (auto& [id, c] : connections) {
        next_deadline = std::min(next_deadline, c.deadline);
        if (c.events == 0) continue;
        fds.push_back({c.fd, c.events, 0});
        ids.push_back(id);
      }
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
      const int timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 1000));
      const int n = ::poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // ENOMEM: do not spin
        continue;
      }
      if (stop.load()) break;
      if (n > 0 && fds[0].revents != 0) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = ::read(wake.fd, &count, sizeof count);
        FinishAuthChecks();
      }
      for (size_t i = 0; n > 0 && i < ids.size(); ++i) {
        if (fds[i + 2].revents == 0) continue;
        auto it = connections.find(ids[i]);
        if (it == connections.end()) continue;
        if (!Advance(it->second)) Close(ids[i]);
      }
      if (n > 0 && fds[1].revents != 0) AcceptAll();
      const auto now = Clock::now();
      for (auto it = connections.begin(); it != connections.end();) {
        const uint64_t id = it->first;
        const bool expired = now >= it->second.deadline;
        ++it;
        if (expired) Close(id);
      }
    }
    while (!connections.empty()) Close(connections.begin()->first);
  }

  void Close(uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& c = it->second;
    Cleanse(c.in);
    if (c.request.authorization) Cleanse(*c.request.authorization);
    if (c.ssl != nullptr) SSL_free(c.ssl);
    if (c.fd >= 0) ::close(c.fd);
    connections.erase(it);
  }

  // The connection to give up for a new one: the oldest that is still before
  // its request (or lingering after its response); else the oldest of all.
  void EvictOne() {
    for (auto& [id, c] : connections) {
      if (c.phase == Phase::kHandshake || c.phase == Phase::kReading || c.phase == Phase::kDraining) {
        Close(id);
        return;
      }
    }
    if (!connections.empty()) Close(connections.begin()->first);
  }

  void AcceptAll() {
    // Fewer than a quarter of the cap per wake: a connection just accepted
    // is read before enough newer ones arrive to make it the oldest.
    const size_t limit = std::clamp<size_t>(options.max_connections / 4, 1, kMaxAcceptsPerWake);
    for (size_t accepted = 0; accepted < limit;) {
      const int fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EMFILE || errno == ENFILE) {
          if (!connections.empty()) {
            EvictOne();  // out of descriptors: the oldest idle connection makes room
            continue;
          }
          // Nothing of ours to close: take the connection with the spare
          // descriptor and drop it, so the backlog does not spin the loop.
          spare.Reset();
          const int dropped = ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
          if (dropped >= 0) ::close(dropped);
          spare = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
          if (dropped >= 0) {
            ++accepted;
            continue;
          }
        }
        return;  // EAGAIN, or ENOBUFS/ENOMEM until the next wake
      }
      ++accepted;
      if (connections.size() >= options.max_connections) EvictOne();
      Connection c;
      c.id = next_id++;
      c.fd = fd;
      c.deadline = Clock::now() + options.request_timeout;
      c.events = POLLIN;
      if (tls) {
        c.ssl = SSL_new(tls.get());
        if (c.ssl == nullptr || SSL_set_fd(c.ssl, fd) != 1) {
          ERR_clear_error();
          if (c.ssl != nullptr) SSL_free(c.ssl);
          ::close(fd);
          continue;
        }
        SSL_set_accept_state(c.ssl);
        c.phase = Phase::kHandshake;
      }
      const uint64_t id = c.id;
      connections.emplace(id, std::move(c));
    }
  }

  // Reads, handles and writes as far as the socket allows; false: close it.
  bool Advance(Connection& c) {
    for (;;) {
      switch (c.phase) {
        case Phase::kHandshake: {
          ERR_clear_error();
          const int r = SSL_do_handshake(c.ssl);
          if (r == 1) {
            c.phase = Phase::kReading;
            continue;
          }
          return WaitForSsl(c, r);
        }
        case Phase::kReading: {
          const int r = ReadSome(c);
          if (r < 0) return false;
          const size_t end = HeaderEnd(c.in);
          if (end != std::string::npos && end <= options.max_header_bytes) {
            HandleRequest(c, std::string_view(c.in).substr(0, end));
            continue;
          }
          if (c.in.size() > options.max_header_bytes) {
            Respond(
                c,
                Plain(431, "request headers are limited to " + std::to_string(options.max_header_bytes) + " bytes\n"),
                false);
            continue;
          }
          if (r == 0) return false;  // the client closed before a full request
          return true;               // waiting for more
        }
        case Phase::kAuthPending:
          c.events = 0;
          return true;
        case Phase::kWriting: {
          while (c.written < c.out.size()) {
            const char* data = c.out.data() + c.written;
            const size_t left = c.out.size() - c.written;
            if (c.ssl != nullptr) {
              ERR_clear_error();
              const int w = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(left, 1 << 20)));
              if (w <= 0) return WaitForSsl(c, w);
              c.written += static_cast<size_t>(w);
            } else {
              const ssize_t w = ::send(c.fd, data, left, MSG_NOSIGNAL);
              if (w < 0) {
                if (errno == EINTR) continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
                c.events = POLLOUT;
                return true;
              }
              c.written += static_cast<size_t>(w);
            }
          }
          // Written: say goodbye, then read (and drop) whatever the client
          // still sends until it closes, so the close does not turn into a
          // reset that could destroy the response in flight.
          if (c.ssl != nullptr) {
            ERR_clear_error();
            SSL_shutdown(c.ssl);  // close_notify, best effort
            ERR_clear_error();
          }
          ::shutdown(c.fd, SHUT_WR);
          c.out.clear();
          c.out.shrink_to_fit();
          c.phase = Phase::kDraining;
          c.deadline = std::min(c.deadline, Clock::now() + kLingerTimeout);
          c.events = POLLIN;
          continue;
        }
        case Phase::kDraining: {
          char buf[4096];
          for (;;) {
            const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
            if (r > 0) continue;
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
            return false;  // closed by the client, or an error
          }
        }
      }
    }
  }

  // After an SSL call returned r <= 0: true while it waits for the socket.
  static bool WaitForSsl(Connection& c, int r) {
    const int err = SSL_get_error(c.ssl, r);
    ERR_clear_error();
    if (err == SSL_ERROR_WANT_READ) {
      c.events = POLLIN;
      return true;
    }
    if (err == SSL_ERROR_WANT_WRITE) {
      c.events = POLLOUT;
      return true;
    }
    return false;
  }

  // Appends what the socket has to c.in (up to just past the header limit).
  // 1: read something or would block, 0: end of stream, -1: error.
  int ReadSome(Connection& c) {
    char buf[4096];
    while (c.in.size() <= options.max_header_bytes) {
      if (c.ssl != nullptr) {
        ERR_clear_error();
        const int r = SSL_read(c.ssl, buf, sizeof buf);
        if (r > 0) {
          c.in.append(buf, static_cast<size_t>(r));
          continue;
        }
        const int err = SSL_get_error(c.ssl, r);
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_READ) {
          c.events = POLLIN;
          return 1;
        }
        if (err == SSL_ERROR_WANT_WRITE) {
          c.events = POLLOUT;
          return 1;
        }
        return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
      }
      const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r == 0) return 0;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.events = POLLIN;
        return 1;
      }
      return -1;
    }
    return 1;
  }

  static size_t HeaderEnd(const std::string& in) {
    const size_t crlf = in.find("\r\n\r\n");
    const size_t lf = in.find("\n\n");
    const size_t a = crlf == std::string::npos ? std::string::npos : crlf + 4;
    const size_t b = lf == std::string::npos ? std::string::npos : lf + 2;
    return std::min(a, b);
  }

  void Respond(Connection& c, const HttpResponse& r, bool head) {
    c.out = Serialize(r, head);
    c.written = 0;
    Cleanse(c.in);
    if (c.request.authorization) Cleanse(*c.request.authorization);
    c.phase = Phase::kWriting;
    c.deadline = Clock::now() + options.write_timeout;
  }

  HttpResponse Unauthorized() const {
    return Plain(401, "Unauthorized\n", "WWW-Authenticate: Basic realm=\"" + options.realm + "\"\r\n");
  }

  void HandleRequest(Connection& c, std::string_view head) {
    auto request = ParseRequest(head);
    if (!request) {
      Respond(c, Plain(400, "Bad Request\n"), false);
      return;
    }
    c.request = std::move(*request);
    const bool is_head = c.request.method == "HEAD";
    if (!options.basic_auth_users.empty()) {
      auto credentials = c.request.authorization ? ParseBasic(*c.request.authorization) : std::nullopt;
      if (!credentials) {
        Respond(c, Unauthorized(), is_head);
        return;
      }
      auto& [user, password] = *credentials;
      const auto found = options.basic_auth_users.find(user);
      const bool known = found != options.basic_auth_users.end();
      // Unknown users are checked against a real user's hash (and always
      // fail): they take as long as a wrong password.
      const std::string& hash = known ? found->second : options.basic_auth_users.begin()->second;
      const Digest key = CacheKey(user, password, hash);
      if (!(known && InCache(key))) {
        if (auth_pending >= kMaxPendingAuthChecks) {
          Cleanse(password);
          Respond(c, Plain(503, "too many password checks in progress; retry\n", "Retry-After: 1\r\n"), is_head);
          return;
        }
        {
          std::lock_guard<std::mutex> lock(auth_mu);
          auth_jobs.push_back({c.id, user, password, hash, known, key});
        }
        Cleanse(password);
        auth_cv.notify_one();
        ++auth_pending;
        c.phase = Phase::kAuthPending;
        c.events = 0;
        c.deadline = Clock::now() + options.write_timeout;
        return;
      }
      Cleanse(password);
    }
    Route(c);
  }

  void Route(Connection& c) {
    const bool is_head = c.request.method == "HEAD";
    if (c.request.method != "GET" && !is_head) {
      Respond(c, Plain(405, "only GET and HEAD\n", "Allow: GET, HEAD\r\n"), false);
      return;
    }
    HttpResponse r;
    try {
      r = handler(c.request.path);
    } catch (const std::exception& e) {
      r = Plain(500, std::string("error: ") + e.what() + "\n");
    }
    Respond(c, r, is_head);
  }

  Digest CacheKey(const std::string& user, const std::string& password, const std::string& hash) const {
    std::string material;
    material.reserve(user.size() + password.size() + hash.size() + 2);
    material.append(user).push_back('\0');
    material.append(hash).push_back('\0');
    material.append(password);
    Digest d{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), hmac_key.data(), static_cast<int>(hmac_key.size()),
         reinterpret_cast<const unsigned char*>(material.data()), material.size(), d.data(), &len);
    Cleanse(material);
    return d;
  }

  bool InCache(const Digest& key) const {
    bool found = false;  // every entry is compared, in constant time
    for (const Digest& d : auth_cache) found |= CRYPTO_memcmp(d.data(), key.data(), d.size()) == 0;
    return found;
  }

  void Remember(const Digest& key) {
    if (InCache(key)) return;
    if (auth_cache.size() < kAuthCacheEntries) {
      auth_cache.push_back(key);
    } else {
      auth_cache[auth_cache_next] = key;
      auth_cache_next = (auth_cache_next + 1) % kAuthCacheEntries;
    }
  }

  // On the loop thread: answers the connections whose bcrypt check finished.
  void FinishAuthChecks() {
    std::vector<AuthResult> results;
    {
      std::lock_guard<std::mutex> lock(auth_mu);
      results.swap(auth_results);
    }
    for (const AuthResult& r : results) {
      --auth_pending;
      auto it = connections.find(r.id);
      if (it == connections.end() || it->second.phase != Phase::kAuthPending) continue;  // closed meanwhile
      Connection& c = it->second;
      if (r.ok) {
        Remember(r.key);
        Route(c);
      } else {
        Respond(c, Unauthorized(), c.request.method == "HEAD");
      }
      if (!Advance(c)) Close(r.id);
    }
  }

  // The helper thread: bcrypt, one check at a time.
  void RunAuthChecks() {
    auto data = std::make_unique<crypt_data>();
    for (;;) {
      AuthJob job;
      {
        std::unique_lock<std::mutex> lock(auth_mu);
        auth_cv.wait(lock, [&] { return auth_stop || !auth_jobs.empty(); });
        if (auth_stop) return;
        job = std::move(auth_jobs.front());
        auth_jobs.pop_front();
      }
      std::memset(data.get(), 0, sizeof(crypt_data));
      const char* got = crypt_r(job.password.c_str(), job.hash.c_str(), data.get());
      bool ok = got != nullptr && got[0] != '*' && std::strlen(got) == job.hash.size() &&
                CRYPTO_memcmp(got, job.hash.data(), job.hash.size()) == 0;
      ok = ok && job.known_user;
      std::memset(data.get(), 0, sizeof(crypt_data));
      Cleanse(job.password);
      {
        std::lock_guard<std::mutex> lock(auth_mu);
        if (auth_stop) return;
        auth_results.push_back({job.id, ok, job.key});
      }
      Wake();
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
int HttpServer::port() const { return impl_->port; }
bool HttpServer::tls() const { return impl_->tls != nullptr; }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, HttpHandler handler) {
  auto hp = SplitHostPort(options.bind_address);
  if (!hp.ok()) return hp.status();
  if (options.max_connections == 0) return InvalidArgument("metrics server: max_connections must be > 0");
  if (options.request_timeout.count() <= 0 || options.write_timeout.count() <= 0)
    return InvalidArgument("metrics server: request and write timeouts must be > 0");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // Idle connections cost a descriptor each, and anyone who reaches the port
  // can open them: at most a quarter of the process's descriptors, so the
  // rest of the process (ZeroMQ peers, worker launches) never meets EMFILE
  // because of /metrics.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    impl->options.max_connections = std::clamp<size_t>(lim.rlim_cur / 4, 1, options.max_connections);
  impl->handler = std::move(handler);
  if (options.tls) {
    auto ctx = MakeTlsContext(*options.tls);
    if (!ctx.ok()) return ctx.status();
    impl->tls = std::move(*ctx);
  }
  if (!options.basic_auth_users.empty() && RAND_bytes(impl->hmac_key.data(), impl->hmac_key.size()) != 1)
    return Internal("metrics server: RAND_bytes: " + OpenSslErrors());
  auto listener = Listen(*hp, options.bind_address);
  if (!listener.ok()) return listener.status();
  impl->listener = std::move(*listener);
  impl->port = BoundPort(impl->listener.fd);
  impl->wake = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (impl->wake.fd < 0) return Internal(std::string("metrics server: eventfd: ") + std::strerror(errno));
  impl->spare = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  Impl* raw = impl.get();
  try {
    if (!options.basic_auth_users.empty()) impl->auth_thread = std::thread([raw] { raw->RunAuthChecks(); });
    impl->loop_thread = std::thread([raw] { raw->Run(); });
  } catch (const std::exception& e) {
    return Internal(std::string("metrics server: starting its thread: ") + e.what());
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace longhaul::monitoring
