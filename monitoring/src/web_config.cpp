#include "longhaul/monitoring/web_config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace longhaul::monitoring {
namespace fs = std::filesystem;

namespace {

// "web config /etc/longhaul/web.yml line 4: tls_server_config.cipher_suites: ..."
class Errors {
 public:
  explicit Errors(const fs::path& file) : file_(file.string()) {}
  Status At(const YAML::Node& node, const std::string& field, const std::string& what) const {
    std::string where = "web config " + file_;
    const YAML::Mark mark = node.Mark();
    if (mark.line >= 0) where += " line " + std::to_string(mark.line + 1);
    return InvalidArgument(where + ": " + field + ": " + what);
  }
  Status File(const std::string& what) const { return InvalidArgument("web config " + file_ + ": " + what); }

 private:
  std::string file_;
};

bool IsScalarString(const YAML::Node& node) { return node.IsScalar(); }

Result<TlsVersion> ParseTlsVersion(const Errors& err, const YAML::Node& node, const std::string& field) {
  if (!IsScalarString(node)) return err.At(node, field, "must be TLS12 or TLS13");
  const std::string v = node.Scalar();
  if (v == "TLS12") return TlsVersion::kTls12;
  if (v == "TLS13") return TlsVersion::kTls13;
  if (v == "TLS10" || v == "TLS11") return err.At(node, field, v + " is not supported (TLS12 or TLS13)");
  return err.At(node, field, "'" + v + "' is not a TLS version (TLS12 or TLS13)");
}

Status CheckReadable(const Errors& err, const YAML::Node& node, const std::string& field, const fs::path& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) {
    const int e = errno;
    return err.At(node, field, "cannot read " + path.string() + ": " + std::strerror(e != 0 ? e : ENOENT));
  }
  return Status::Ok();
}

Result<std::optional<TlsServerConfig>> ParseTls(const Errors& err, const YAML::Node& node, const fs::path& base) {
  const std::string section = "tls_server_config";
  if (node.IsNull()) return std::optional<TlsServerConfig>();
  if (!node.IsMap()) return err.At(node, section, "must be a mapping");
  if (node.size() == 0) return std::optional<TlsServerConfig>();
  TlsServerConfig tls;
  YAML::Node cert_node, key_node;
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!IsScalarString(kv.first)) return err.At(kv.first, section, "keys must be strings");
    const std::string key = kv.first.Scalar();
    const std::string field = section + "." + key;
    if (!seen.insert(key).second) return err.At(kv.first, field, "given twice");
    const YAML::Node& value = kv.second;
    if (key == "cert_file" || key == "key_file") {
      if (!IsScalarString(value) || value.Scalar().empty()) return err.At(value, field, "must be a file path");
      fs::path p = value.Scalar();
      if (p.is_relative()) p = base / p;  // exporter-toolkit: relative to web.yml's folder
      p = p.lexically_normal();
      if (key == "cert_file") {
        tls.cert_file = p;
        cert_node = value;
      } else {
        tls.key_file = p;
        key_node = value;
      }
    } else if (key == "min_version") {
      auto v = ParseTlsVersion(err, value, field);
      if (!v.ok()) return v.status();
      tls.min_version = *v;
    } else if (key == "max_version") {
      auto v = ParseTlsVersion(err, value, field);
      if (!v.ok()) return v.status();
      tls.max_version = *v;
    } else if (key == "client_auth_type") {
      if (!IsScalarString(value)) return err.At(value, field, "must be a string");
      const std::string v = value.Scalar();
      if (!v.empty() && v != "NoClientCert")
        return err.At(value, field,
                      "'" + v +
                          "' is not supported: longhaul's /metrics server does not verify client "
                          "certificates (only NoClientCert)");
    } else if (key == "cert" || key == "key" || key == "client_ca_file" || key == "client_ca" ||
               key == "client_allowed_sans" || key == "cipher_suites" || key == "curve_preferences" ||
               key == "prefer_server_cipher_suites") {
      return err.At(kv.first, field, "is not supported by longhaul's /metrics server");
    } else {
      return err.At(kv.first, field,
                    "unknown key (known: cert_file, key_file, min_version, max_version, client_auth_type)");
    }
  }
  if (tls.cert_file.empty()) return err.At(node, section + ".cert_file", "missing (key_file needs a certificate)");
  if (tls.key_file.empty()) return err.At(node, section + ".key_file", "missing (cert_file needs a private key)");
  if (tls.max_version && *tls.max_version < tls.min_version)
    return err.At(node, section + ".max_version", "is below min_version");
  LONGHAUL_RETURN_IF_ERROR(CheckReadable(err, cert_node, section + ".cert_file", tls.cert_file));
  LONGHAUL_RETURN_IF_ERROR(CheckReadable(err, key_node, section + ".key_file", tls.key_file));
  return std::optional<TlsServerConfig>(std::move(tls));
}

Result<std::map<std::string, std::string>> ParseUsers(const Errors& err, const YAML::Node& node) {
  const std::string section = "basic_auth_users";
  std::map<std::string, std::string> users;
  if (node.IsNull()) return users;
  if (!node.IsMap()) return err.At(node, section, "must be a mapping of user name to bcrypt hash");
  for (const auto& kv : node) {
    if (!IsScalarString(kv.first) || kv.first.Scalar().empty())
      return err.At(kv.first, section, "user names must be non-empty strings");
    const std::string user = kv.first.Scalar();
    const std::string field = section + "." + user;
    if (user.find(':') != std::string::npos)
      return err.At(kv.first, field, "a basic auth user name cannot contain ':'");
    // The value is never echoed: it may be a plaintext password by mistake.
    if (!IsScalarString(kv.second) || !IsBcryptHash(kv.second.Scalar()))
      return err.At(kv.second, field,
                    "user '" + user +
                        "' must have a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters), "
                        "e.g. from `htpasswd -nBC 10 " +
                        user + "`");
    if (!users.emplace(user, kv.second.Scalar()).second) return err.At(kv.first, field, "given twice");
  }
  return users;
}

}  // namespace

bool IsBcryptHash(const std::string& hash) {
  if (hash.size() != 60) return false;
  if (hash.compare(0, 4, "$2a$") != 0 && hash.compare(0, 4, "$2b$") != 0 && hash.compare(0, 4, "$2y$") != 0)
    return false;
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9' || hash[6] != '$') return false;
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (size_t i = 7; i < hash.size(); ++i) {
    const char c = hash[i];
    const bool ok = c == '.' || c == '/' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

Result<WebConfig> LoadWebConfig(const fs::path& path) {
  const Errors err(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int e = errno;
    return NotFound("web config " + path.string() + ": cannot read: " + std::strerror(e != 0 ? e : ENOENT));
  }
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    std::string where = "web config " + path.string();
    if (e.mark.line >= 0) where += " line " + std::to_string(e.mark.line + 1);
    return InvalidArgument(where + ": not valid YAML: " + e.msg);
  }
  WebConfig config;
  config.source = path;
  if (!root.IsDefined() || root.IsNull()) return config;  // an empty file: plain HTTP, no auth
  if (!root.IsMap()) return err.File("the top level must be a mapping (tls_server_config, basic_auth_users)");
  fs::path base = path.parent_path();
  if (base.empty()) base = ".";
  std::error_code ec;
  const fs::path absolute_base = fs::absolute(base, ec);
  if (!ec) base = absolute_base;
  std::set<std::string> seen;
  for (const auto& kv : root) {
    if (!IsScalarString(kv.first)) return err.At(kv.first, "(top level)", "keys must be strings");
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) return err.At(kv.first, key, "given twice");
    if (key == "tls_server_config") {
      auto tls = ParseTls(err, kv.second, base);
      if (!tls.ok()) return tls.status();
      config.tls = std::move(*tls);
    } else if (key == "basic_auth_users") {
      auto users = ParseUsers(err, kv.second);
      if (!users.ok()) return users.status();
      config.basic_auth_users = std::move(*users);
    } else if (key == "http_server_config" || key == "rate_limit") {
      return err.At(kv.first, key, "is not supported by longhaul's /metrics server");
    } else {
      return err.At(kv.first, key, "unknown key (known: tls_server_config, basic_auth_users)");
    }
  }
  return config;
}

}  // namespace longhaul::monitoring
