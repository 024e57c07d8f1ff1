// CURVE keys, allowlists and the ZAP handler that enforces them.
//
// Every longhaul ZeroMQ socket (control plane and WAN data plane) is CURVE
// encrypted. CURVE alone only authenticates the *server*: without a ZAP handler
// a CURVE server accepts ANY client key pair. So every server context runs a
// ZapAuthenticator, which admits only client public keys on an Allowlist and
// logs (and counts) every rejection with the offending key.
//
// Key files (written by `longhaul keys gen`, read here), all keys Z85 (40 chars):
//   <name>.key   mode 0600:  "public-key = <z85>" and "secret-key = <z85>" lines
//   <name>.pub   "<z85>" on one line (so a .pub file is also a valid allowlist file)
// Allowlist: a file with one Z85 public key per line ('#' at line start
// or after whitespace starts a comment; '#' inside a key is Z85), or a
// directory whose *.pub files are each one key.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <zmq.hpp>

#include "longhaul/common/status.h"

namespace longhaul::wan_transport {

inline constexpr size_t kZ85KeyChars = 40;

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 chars
  std::string secret_key;  // Z85, 40 chars
};

// A fresh key pair from libzmq (libsodium underneath).
Result<CurveKeyPair> GenerateCurveKeyPair();

// Ok when `key` is 40 Z85 chars that decode to 32 bytes; otherwise says what is wrong.
Status ValidateZ85Key(std::string_view key, std::string_view what);

// Writes <dir>/<name>.key (public+secret, mode 0600) and <dir>/<name>.pub. Creates
// dir if needed; refuses (kAlreadyExists) to overwrite either file.
Status WriteKeyPair(const std::filesystem::path& dir, const std::string& name, const CurveKeyPair& keys);

// Reads a .key file; checks both keys are valid Z85 and that the secret key
// really produces the public key. Errors name the file and the problem.
Result<CurveKeyPair> LoadKeyPair(const std::filesystem::path& key_file);
// The pair of a secret key (its public key derived); errors start with `what`.
Result<CurveKeyPair> KeyPairFromSecret(const std::string& secret_key, const std::string& what);
// Reads a .pub file (its first non-comment line; a "public-key = X" line is accepted too).
Result<std::string> LoadPublicKey(const std::filesystem::path& pub_file);

// The set of client public keys a server admits.
// What a key may do on the control plane (docs: "Roles" in README).
struct KeyRole {
  // agent: speaks for the regions it names; user: submits jobs and cancels its
  // own; admin: a user who may also cancel anyone's job and remove regions.
  enum class Kind { kAgent, kUser, kAdmin };
  Kind kind = Kind::kUser;
  std::vector<std::string> regions;  // agent: the regions it may speak for (at least one)
  std::string name;                  // the key's name (its .pub file's stem)
};

class Allowlist {
 public:
  Allowlist() = default;
  // A file with one Z85 key per line ('#' comments, blank lines ignored), or a
  // directory of *.pub files. An invalid line or an empty result is an error
  // naming the file (and line). A directory may hold a `roles` file giving each
  // key (by .pub name) its role, one line each:
  //     eu-west  agent eu-west        # may speak the region protocol for eu-west only
  //     alice    user                 # may use the CLI
  // With a roles file, every key needs a line and every line a key.
  static Result<Allowlist> Load(const std::filesystem::path& file_or_dir);
  static Allowlist Of(std::vector<std::string> keys);

  bool Contains(std::string_view public_key_z85) const;
  size_t size() const { return keys_.size(); }
  void Add(std::string public_key_z85) { keys_.insert(std::move(public_key_z85)); }
  void SetRole(const std::string& public_key_z85, KeyRole role) { roles_[public_key_z85] = std::move(role); }
  // The key's role; nullptr when the allowlist has no roles for it.
  const KeyRole* RoleOf(std::string_view public_key_z85) const;
  bool has_roles() const { return !roles_.empty(); }

 private:
  std::unordered_set<std::string> keys_;
  std::unordered_map<std::string, KeyRole> roles_;
};

// Parses a roles file's text (see Allowlist::Load): name -> role.
Result<std::unordered_map<std::string, KeyRole>> ParseRoles(const std::string& text, const std::string& file);

// Serves the ZAP endpoint (inproc://zeromq.zap.01) of one zmq context on its own
// thread. Only one may exist per context, and it must be destroyed before the
// context is closed. CURVE clients whose key is on the allowlist are admitted;
// anything else (other key, other mechanism such as NULL/PLAIN) is refused,
// logged with the key and peer address, and counted. A refused client gets no
// messages at all: ZeroMQ drops the connection during the handshake (and libzmq
// 4.3 does not retry it).
//
// Keys may be admitted later (Admit): with `admit_wait` > 0 a CURVE client whose
// key is not admitted yet is held in its handshake for up to that long (at most
// kMaxPendingClients at once) and let in as soon as its key is admitted. The WAN
// data plane needs this: a worker learns its peers' per-launch keys from the
// round's START, and a peer that got its START a moment earlier is already
// connecting. Held clients are bounded in all and per address, so a flood of
// unknown keys from one host cannot crowd the real peers out.
class ZapAuthenticator {
 public:
  static constexpr size_t kMaxPendingClients = 1024;
  static constexpr size_t kMaxPendingPerHost = 64;

  static Result<std::unique_ptr<ZapAuthenticator>> Start(zmq::context_t& ctx, Allowlist allowlist,
                                                         std::chrono::milliseconds admit_wait = {});
  ~ZapAuthenticator();
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  // Adds client keys (Z85) to the allowlist; held clients with them get in.
  void Admit(const std::vector<std::string>& public_keys);

  uint64_t rejected() const { return rejected_.load(); }
  uint64_t accepted() const { return accepted_.load(); }

 private:
  struct Pending {
    std::string routing_id, request_id, key, address;
    std::chrono::steady_clock::time_point deadline;
  };
  ZapAuthenticator(zmq::context_t& ctx, Allowlist allowlist, std::chrono::milliseconds admit_wait);
  void Serve();
  bool Handle();  // one request; false when nothing was read
  void SettlePending(bool expire_all);
  size_t PendingFrom(const std::string& address) const;
  bool Admitted(const std::string& key) const;
  void Reply(const std::string& routing_id, const std::string& request_id, bool ok, const std::string& key);
  void Refuse(const std::string& mechanism, const std::string& key, const std::string& address, const char* why);

  zmq::socket_t socket_;  // ROUTER: replies may be deferred (Pending)
  mutable std::mutex mu_;
  Allowlist allowlist_;   // guarded by mu_
  const std::chrono::milliseconds admit_wait_;
  std::vector<Pending> pending_;  // ZAP thread only
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> accepted_{0};
  std::thread thread_;
};

// The ZAP domain longhaul servers use (any non-empty value makes libzmq consult ZAP).
inline constexpr const char* kZapDomain = "longhaul";

// Configure a socket before bind()/connect(). A server needs a ZapAuthenticator on
// its context to restrict clients; MakeCurveServer sets the ZAP domain.
void MakeCurveServer(zmq::socket_t& socket, const CurveKeyPair& own);
void MakeCurveClient(zmq::socket_t& socket, const CurveKeyPair& own, const std::string& server_public_key);

}  // namespace longhaul::wan_transport
