// HttpServer: the small HTTP/1.1 server under MetricsServer (private to
// longhaul_monitoring).
//
// One thread runs a poll() loop over a non-blocking listening socket and every
// connection, so idle or slow clients cost a file descriptor and a few bytes,
// never a thread, and can never hold up a scrape:
// - each connection has `request_timeout` for the TLS handshake plus the
//   request headers (at most `max_header_bytes`), then `write_timeout` for the
//   response; past its deadline it is closed;
// - at most `max_connections` are open: accepting one more closes the oldest
//   connection that has not sent a full request yet (and, when the process is
//   out of file descriptors, the same happens), so a new scrape always gets in;
// - every response carries `Connection: close`; the socket is closed once the
//   response is written (written as the socket accepts it, never blocking);
// - TLS (OpenSSL 3) is driven non-blocking by SSL_ERROR_WANT_READ/WANT_WRITE;
// - basic auth checks bcrypt with crypt_r on a helper thread (51 ms at cost 10),
//   so the loop never waits for it, and remembers credentials that passed by
//   HMAC-SHA-256 under a per-process random key, compared in constant time, so
//   a scrape every 10 s pays for bcrypt once.
// An eventfd wakes the loop for shutdown; the destructor joins both threads and
// closes every socket.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/monitoring/web_config.h"

namespace longhaul::monitoring {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string extra_headers;  // complete "Name: value\r\n" lines
};

// Called on the loop thread for each authenticated GET or HEAD (path without
// the query string). Must not block for long.
using HttpHandler = std::function<HttpResponse(std::string_view path)>;

struct HttpServerOptions {
  std::string bind_address;                             // host:port; port 0 picks a free port
  std::optional<TlsServerConfig> tls;                   // nullopt: plain HTTP
  std::map<std::string, std::string> basic_auth_users;  // name -> bcrypt hash; empty: no auth
  std::string realm = "longhaul";
  std::chrono::milliseconds request_timeout{5000};  // handshake + request headers
  std::chrono::milliseconds write_timeout{10000};   // writing the response
  size_t max_connections = 1024;
  size_t max_header_bytes = 8192;
};

class HttpServer {
 public:
  // Binds, listens and starts the loop. Errors name the address, or the file
  // and OpenSSL's reason when the certificate or key cannot be used.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  bool tls() const;

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace longhaul::monitoring
