// Test helpers for /metrics over TLS with basic auth: a self-signed
// certificate from the openssl CLI, bcrypt hashes from libxcrypt (cost 4, so
// tests stay fast) and an HTTPS client on OpenSSL's C API that verifies the
// server against that certificate.
#pragma once

#include <crypt.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "monitoring/scrape_client.h"
#include "support/subprocess.h"

namespace longhaul::testing {

struct TlsFiles {
  std::string cert;  // PEM, CN=localhost, SAN DNS:localhost, IP:127.0.0.1
  std::string key;   // PEM, unencrypted P-256
};

// Writes cert.pem and key.pem into `dir`; nullopt (and the CLI's output in
// *log) when openssl fails.
inline std::optional<TlsFiles> MakeSelfSignedCert(const std::filesystem::path& dir, std::string* log) {
  TlsFiles files{(dir / "cert.pem").string(), (dir / "key.pem").string()};
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
      " -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1"
      " -keyout '" +
      files.key + "' -out '" + files.cert + "' 2>&1";
  if (RunCommand(cmd, log, std::chrono::seconds(60)) != 0) return std::nullopt;
  return files;
}

// A bcrypt ($2b$) hash of `password`; "" on failure.
inline std::string BcryptHash(const std::string& password, int cost = 4) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, setting, sizeof setting) == nullptr)
    return "";
  auto data = std::make_unique<crypt_data>();
  const char* hash = crypt_r(password.c_str(), setting, data.get());
  if (hash == nullptr || hash[0] == '*') return "";
  return hash;
}

inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Sends `request` over TLS to 127.0.0.1:port, verifying the server's
// certificate against `ca_file` for the name "localhost"; reads until the
// server closes. nullopt when the handshake or IO fails (`error` says why).
inline std::optional<HttpReply> TlsHttp(int port, const std::string& request, const std::string& ca_file,
                                        std::string* error = nullptr,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto fail = [&](const std::string& what) -> std::optional<HttpReply> {
    if (error != nullptr) {
      *error = what;
      char buf[256];
      for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
        ERR_error_string_n(e, buf, sizeof buf);
        *error += std::string(": ") + buf;
      }
    }
    ERR_clear_error();
    return std::nullopt;
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return fail("SSL_CTX_new");
  if (SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1) return fail("loading " + ca_file);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const int fd = ConnectLoopback(port, timeout);
  if (fd < 0) return fail("connect");
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  struct CloseFd {
    int fd;
    ~CloseFd() { ::close(fd); }
  } close_fd{fd};
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return fail("SSL_new");
  SSL_set_tlsext_host_name(ssl.get(), "localhost");
  SSL_set1_host(ssl.get(), "localhost");
  if (SSL_connect(ssl.get()) != 1) return fail("TLS handshake");
  if (SSL_write(ssl.get(), request.data(), static_cast<int>(request.size())) <= 0) return fail("SSL_write");
  std::string raw;
  char buf[16384];
  for (;;) {
    const int n = SSL_read(ssl.get(), buf, sizeof buf);
    if (n <= 0) break;  // close_notify, EOF, or the timeout
    raw.append(buf, static_cast<size_t>(n));
  }
  ERR_clear_error();
  auto reply = ParseHttpReply(raw);
  if (!reply) return fail("no HTTP response (got " + std::to_string(raw.size()) + " bytes)");
  reply->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return reply;
}

inline std::string BasicAuthHeader(const std::string& user, const std::string& password) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::string in = user + ":" + password;
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return "Authorization: Basic " + out + "\r\n";
}

}  // namespace longhaul::testing
