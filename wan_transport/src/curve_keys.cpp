// Key generation, key files and allowlists (see curve.h for the file formats).
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <zmq.h>

#include "longhaul/wan_transport/curve.h"

namespace longhaul::wan_transport {
namespace {

namespace fs = std::filesystem;

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

Result<std::string> ReadSmallFile(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return NotFound("key file " + file.string() + ": does not exist");
  if (fs::is_directory(file, ec)) return InvalidArgument("key file " + file.string() + ": is a directory");
  auto size = fs::file_size(file, ec);
  if (ec) return InvalidArgument("key file " + file.string() + ": " + ec.message());
  if (size > 64 * 1024) return InvalidArgument("key file " + file.string() + ": too large (" + std::to_string(size) + " bytes)");
  std::ifstream in(file, std::ios::binary);
  if (!in) return PermissionDenied("key file " + file.string() + ": cannot open: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Lines that carry content: comments ('#' to end of line) and blanks removed.
std::vector<std::pair<int, std::string>> ContentLines(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    // '#' is also a Z85 character, so a comment is a '#' after whitespace, or a
    // line starting with '#' that is not itself a key.
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '#' && std::isspace(static_cast<unsigned char>(line[i - 1]))) {
        line.resize(i);
        break;
      }
    }
    std::string t = Trim(line);
    if (!t.empty() && t[0] == '#' && !ValidateZ85Key(t, "").ok()) continue;
    if (!t.empty()) out.emplace_back(n, std::move(t));
  }
  return out;
}

// "key = value" -> (key, value); a bare value gives an empty key.
std::pair<std::string, std::string> SplitAssignment(const std::string& line) {
  auto eq = line.find('=');
  // Z85 itself contains '=', so only "name = value" with an identifier name counts.
  if (eq != std::string::npos) {
    std::string name = Trim(std::string_view(line).substr(0, eq));
    bool ident = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    if (ident && (name == "public-key" || name == "secret-key")) {
      return {name, Trim(std::string_view(line).substr(eq + 1))};
    }
  }
  return {"", line};
}

Status WriteExclusive(const fs::path& file, const std::string& text, mode_t mode) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return Status(StatusCode::kAlreadyExists, file.string() + ": already exists; refusing to overwrite a key");
    return PermissionDenied(file.string() + ": cannot create: " + std::strerror(errno));
  }
  ::fchmod(fd, mode);  // umask may have cleared bits we asked for; never adds any beyond mode
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return Internal(file.string() + ": write failed: " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Internal(file.string() + ": write failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Result<CurveKeyPair> GenerateCurveKeyPair() {
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return Internal(std::string("zmq_curve_keypair failed (libzmq built without CURVE?): ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{pub, sec};
}

Status ValidateZ85Key(std::string_view key, std::string_view what) {
  if (key.size() != kZ85KeyChars) {
    return InvalidArgument(std::string(what) + ": bad length " + std::to_string(key.size()) + ", a Z85 CURVE key has 40 characters");
  }
  static constexpr std::string_view kAlphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  for (char c : key) {
    if (kAlphabet.find(c) == std::string_view::npos) {
      return InvalidArgument(std::string(what) + ": not Z85 (character '" + std::string(1, c) + "' is outside the Z85 alphabet)");
    }
  }
  uint8_t raw[32];
  std::string copy(key);
  if (zmq_z85_decode(raw, copy.c_str()) == nullptr) return InvalidArgument(std::string(what) + ": not Z85 (does not decode)");
  return Status::Ok();
}

Status WriteKeyPair(const fs::path& dir, const std::string& name, const CurveKeyPair& keys) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return InvalidArgument("key name '" + name + "': must be a plain file name");
  }
  LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(keys.public_key, "public key"));
  LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(keys.secret_key, "secret key"));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return PermissionDenied("key directory " + dir.string() + ": " + ec.message());
  fs::path key_file = dir / (name + ".key");
  fs::path pub_file = dir / (name + ".pub");
  if (fs::exists(key_file, ec) || fs::exists(pub_file, ec)) {
    return Status(StatusCode::kAlreadyExists, (fs::exists(key_file, ec) ? key_file : pub_file).string() +
                                                  ": already exists; refusing to overwrite a key");
  }
  LONGHAUL_RETURN_IF_ERROR(WriteExclusive(key_file,
                                          "# longhaul CURVE key pair '" + name + "' (Z85). Keep secret.\n"
                                          "public-key = " + keys.public_key + "\n"
                                          "secret-key = " + keys.secret_key + "\n",
                                          0600));
  return WriteExclusive(pub_file, "# longhaul CURVE public key '" + name + "' (Z85)\n" + keys.public_key + "\n", 0644);
}

Result<CurveKeyPair> LoadKeyPair(const fs::path& key_file) {
  // A secret key others can read is a key others may hold: refuse it, as ssh does.
  struct stat st {};
  if (::stat(key_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPrecondition("secret key file " + key_file.string() + " is accessible by group or others (mode " +
                              mode + "); run: chmod 600 " + key_file.string());
  }
  LONGHAUL_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(key_file));
  CurveKeyPair keys;
  for (auto& [line_no, line] : ContentLines(text)) {
    auto [name, value] = SplitAssignment(line);
    std::string where = key_file.string() + " line " + std::to_string(line_no);
    if (name == "public-key") keys.public_key = value;
    else if (name == "secret-key") keys.secret_key = value;
    else return InvalidArgument(where + ": expected 'public-key = <z85>' or 'secret-key = <z85>'");
  }
  if (keys.secret_key.empty()) return InvalidArgument(key_file.string() + ": no 'secret-key = ...' line (is this a .pub file?)");
  if (keys.public_key.empty()) return InvalidArgument(key_file.string() + ": no 'public-key = ...' line");
  LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(keys.public_key, key_file.string() + ": public key"));
  LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(keys.secret_key, key_file.string() + ": secret key"));
  char derived[41] = {};
  if (zmq_curve_public(derived, keys.secret_key.c_str()) != 0 || keys.public_key != derived) {
    return InvalidArgument(key_file.string() + ": public key does not belong to the secret key");
  }
  return keys;
}

Result<CurveKeyPair> KeyPairFromSecret(const std::string& secret_key, const std::string& what) {
  LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(secret_key, what + ": secret key"));
  char derived[41] = {};
  if (zmq_curve_public(derived, secret_key.c_str()) != 0) return InvalidArgument(what + ": no public key derives from it");
  return CurveKeyPair{derived, secret_key};
}

Result<std::string> LoadPublicKey(const fs::path& pub_file) {
  LONGHAUL_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(pub_file));
  auto lines = ContentLines(text);
  if (lines.empty()) return InvalidArgument(pub_file.string() + ": empty, expected one Z85 public key");
  auto [name, value] = SplitAssignment(lines.front().second);
  if (name == "secret-key") return InvalidArgument(pub_file.string() + ": starts with a secret key; expected a public key");
  LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(value, pub_file.string() + " line " + std::to_string(lines.front().first)));
  return value;
}

Result<Allowlist> Allowlist::Load(const fs::path& file_or_dir) {
  std::error_code ec;
  Allowlist list;
  if (fs::is_directory(file_or_dir, ec)) {
    std::unordered_map<std::string, std::string> by_name;  // .pub stem -> key
    for (const auto& entry : fs::directory_iterator(file_or_dir, ec)) {
      if (entry.path().extension() != ".pub") continue;
      LONGHAUL_ASSIGN_OR_RETURN(std::string key, LoadPublicKey(entry.path()));
      by_name[entry.path().stem().string()] = key;
      list.Add(std::move(key));
    }
    if (ec) return InvalidArgument("allowlist " + file_or_dir.string() + ": " + ec.message());
    const fs::path roles_file = file_or_dir / "roles";
    if (fs::exists(roles_file, ec)) {
      LONGHAUL_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(roles_file));
      LONGHAUL_ASSIGN_OR_RETURN(auto roles, ParseRoles(text, roles_file.string()));
      for (const auto& [name, key] : by_name) {
        auto it = roles.find(name);
        if (it == roles.end()) return InvalidArgument(roles_file.string() + ": key " + name + ".pub has no role line");
        list.SetRole(key, it->second);
      }
      for (const auto& [name, role] : roles) {
        if (!by_name.count(name)) return InvalidArgument(roles_file.string() + ": role for '" + name + "' but no " + name + ".pub");
      }
    }
  } else {
    if (!fs::exists(file_or_dir, ec)) return NotFound("allowlist " + file_or_dir.string() + ": does not exist");
    LONGHAUL_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(file_or_dir));
    for (auto& [line_no, line] : ContentLines(text)) {
      auto [name, value] = SplitAssignment(line);
      if (name == "secret-key") continue;  // a .key file lists its own public key too
      LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(value, "allowlist " + file_or_dir.string() + " line " + std::to_string(line_no)));
      list.Add(std::move(value));
    }
  }
  if (list.size() == 0) return InvalidArgument("allowlist " + file_or_dir.string() + ": contains no public keys");
  return list;
}

Allowlist Allowlist::Of(std::vector<std::string> keys) {
  Allowlist list;
  for (auto& k : keys) list.Add(std::move(k));
  return list;
}

const KeyRole* Allowlist::RoleOf(std::string_view public_key_z85) const {
  auto it = roles_.find(std::string(public_key_z85));
  return it == roles_.end() ? nullptr : &it->second;
}

Result<std::unordered_map<std::string, KeyRole>> ParseRoles(const std::string& text, const std::string& file) {
  std::unordered_map<std::string, KeyRole> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    const std::string where = file + " line " + std::to_string(n);
    if (w.size() < 2 || (w[1] != "agent" && w[1] != "user" && w[1] != "admin")) {
      return InvalidArgument(where + ": expected '<key name> agent <region>...', '<key name> user' or '<key name> admin'");
    }
    KeyRole role;
    role.name = w[0];
    role.kind = w[1] == "agent" ? KeyRole::Kind::kAgent : w[1] == "admin" ? KeyRole::Kind::kAdmin : KeyRole::Kind::kUser;
    if (role.kind != KeyRole::Kind::kAgent && w.size() > 2)
      return InvalidArgument(where + ": a " + w[1] + " key takes no regions");
    if (role.kind == KeyRole::Kind::kAgent && w.size() == 2)
      return InvalidArgument(where + ": an agent key must name the regions it may speak for");
    role.regions.assign(w.begin() + 2, w.end());
    if (!out.emplace(w[0], std::move(role)).second) return InvalidArgument(where + ": a second role for '" + w[0] + "'");
  }
  return out;
}

bool Allowlist::Contains(std::string_view public_key_z85) const {
  return keys_.count(std::string(public_key_z85)) != 0;
}

void MakeCurveServer(zmq::socket_t& socket, const CurveKeyPair& own) {
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
  socket.set(zmq::sockopt::zap_domain, kZapDomain);
}

void MakeCurveClient(zmq::socket_t& socket, const CurveKeyPair& own, const std::string& server_public_key) {
  socket.set(zmq::sockopt::curve_serverkey, server_public_key);
  socket.set(zmq::sockopt::curve_publickey, own.public_key);
  socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
}

}  // namespace longhaul::wan_transport
