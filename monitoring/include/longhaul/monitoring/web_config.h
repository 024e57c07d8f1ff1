// WebConfig: TLS and basic auth for /metrics, read from a web.yml written the
// way Prometheus and its exporters write theirs (exporter-toolkit's
// --web.config.file), so one file format serves the whole monitoring stack.
//
// The subset understood:
//
//   tls_server_config:
//     cert_file: server.crt        # PEM, leaf first then intermediates
//     key_file: server.key         # PEM, not password-protected
//     min_version: TLS12           # TLS12 (default) or TLS13
//     max_version: TLS13           # optional
//     client_auth_type: NoClientCert   # the only value accepted
//   basic_auth_users:
//     prometheus: $2y$10$...       # bcrypt hashes ($2a$, $2b$, $2y$), 60 chars
//
// Relative cert_file/key_file paths are resolved against the folder holding
// web.yml (as exporter-toolkit does). An empty file, or one without
// tls_server_config, serves plain HTTP. Everything else (unknown keys, cipher
// suites, client certificates, http_server_config, inline cert/key, ...) is
// refused with an error naming the file and the key, never silently ignored.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::monitoring {

enum class TlsVersion { kTls12, kTls13 };

struct TlsServerConfig {
  std::filesystem::path cert_file;  // absolute once loaded
  std::filesystem::path key_file;   // absolute once loaded
  TlsVersion min_version = TlsVersion::kTls12;
  std::optional<TlsVersion> max_version;
};

struct WebConfig {
  std::filesystem::path source;                         // the web.yml it was read from
  std::optional<TlsServerConfig> tls;                   // nullopt: plain HTTP
  std::map<std::string, std::string> basic_auth_users;  // name -> bcrypt hash; empty: no auth
};

// Reads and validates `path`. The cert and key files must exist and be
// readable; whether they hold a usable certificate and key is checked when the
// server builds its TLS context.
Result<WebConfig> LoadWebConfig(const std::filesystem::path& path);

// True when `hash` has the form of a bcrypt hash crypt(3) verifies:
// $2a$, $2b$ or $2y$, a two-digit cost 04..31, '$', 53 characters of bcrypt's base64.
bool IsBcryptHash(const std::string& hash);

}  // namespace longhaul::monitoring
