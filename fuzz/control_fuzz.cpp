// Fuzz target: the orchestrator's control-message handlers, along the path of
// ControlServer::HandleIncoming (orchestrator/src/control_server.cpp): frame bytes
// -> proto::DecodeControl -> AuthorizeControl (the key's role) -> Orchestrator::Handle,
// with Orchestrator::Tick as time passes. The Orchestrator is built in-process as
// tests/orchestrator/flow_rig.h does (ManualClock, a real StateStore), fresh for
// every input so runs are deterministic. The store is an in-memory SQLite database
// (":memory:"); set LONGHAUL_FUZZ_STATE_FILE=1 to use a WAL file in this process's
// temporary folder instead (slower, closer to production).
//
// Input: byte 0 flags (bit 0: regions a, b, c register (identities id-a, id-b,
// id-c) and heartbeat first; bit 1: then a 3-round job is submitted and every
// region says ready, so job-000001 runs round 1 epoch 1). Then up to 64 records
// { u8 op; u16 n; n bytes }:
//   op & 3 = 0: the bytes are a raw frame;
//            1: the bytes are a ControlMessage, wrapped in a valid frame;
//            2: as 1, with protocol_version set to 1 (re-encoded);
//            3: no bytes; time advances n * 10 ms, then Tick().
//   (op >> 2) & 3: the sender's identity: id-a, id-b, id-c, cli.
//   (op >> 4) & 3: its key's role: none (--insecure), agent (for the identity's
//                  region; cli: any region), user, admin.
//   op & 0x40: Tick() after the message.
// LONGHAUL_FUZZ_TRACE=1 prints what the orchestrator sends.
// Properties: no crash, UB or uncaught exception; everything the orchestrator or
// its server sends decodes on the other side (DecodeControl of EncodeControl; e.g.
// a proto3 string cut inside a UTF-8 sequence does not).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_proto.h"
#include "longhaul/common/clock.h"
#include "longhaul/orchestrator/authorization.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/orchestrator.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/proto/frame.h"

namespace {

using namespace longhaul;
using namespace longhaul::orchestrator;
using namespace std::chrono_literals;

constexpr size_t kMaxInput = 64 << 10;
constexpr size_t kMaxRecords = 64;
constexpr const char* kIdentities[4] = {"id-a", "id-b", "id-c", "cli"};
constexpr const char* kRegions[3] = {"a", "b", "c"};

bool UseStateFile() {
  static const bool on = [] {
    const char* v = std::getenv("LONGHAUL_FUZZ_STATE_FILE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

std::filesystem::path StatePath() {
  if (!UseStateFile()) return ":memory:";
  const std::filesystem::path file = fuzz::ProcessTempDir::Get() / "state.sqlite";
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix, ec);
  return file;
}

// LONGHAUL_FUZZ_TRACE=1: print every message sent (to replay a crash by hand:
// `LONGHAUL_FUZZ_TRACE=1 build/bin/control_fuzz crash-...`).
bool Trace() {
  static const bool on = std::getenv("LONGHAUL_FUZZ_TRACE") != nullptr;
  return on;
}

// What a peer does with a frame the orchestrator sent it.
void CheckSent(const std::string& to, const v1::ControlMessage& msg) {
  if (Trace()) std::fprintf(stderr, "-> %s: %s\n", to.c_str(), msg.ShortDebugString().substr(0, 300).c_str());
  auto decoded = proto::DecodeControl(proto::EncodeControl(msg));
  LONGHAUL_FUZZ_CHECK(decoded.ok());
}

struct Peer {
  std::string identity;
  wan_transport::KeyRole role;
  bool has_role = false;
  PeerKey key;
};

// ControlServer::HandleIncoming's view of the sender.
Peer MakePeer(uint8_t op) {
  Peer p;
  const int who = (op >> 2) & 3;
  p.identity = kIdentities[who];
  switch ((op >> 4) & 3) {
    case 0:
      p.key.admin = true;  // insecure: no roles, everything allowed
      return p;
    case 1:
      p.role.kind = wan_transport::KeyRole::Kind::kAgent;
      if (who < 3) p.role.regions = {kRegions[who]};
      p.role.name = "agent-" + p.identity;
      break;
    case 2:
      p.role.kind = wan_transport::KeyRole::Kind::kUser;
      p.role.name = "user-" + p.identity;
      break;
    default:
      p.role.kind = wan_transport::KeyRole::Kind::kAdmin;
      p.role.name = "admin-" + p.identity;
      break;
  }
  p.has_role = true;
  p.key.public_key = "key-" + p.role.name;
  p.key.name = p.role.name;
  p.key.admin = p.role.kind == wan_transport::KeyRole::Kind::kAdmin;
  return p;
}

// ControlServer::HandleIncoming after the socket: refusals are answered by the
// server itself and never reach the orchestrator.
void Deliver(Orchestrator& o, const Peer& peer, std::string_view frame) {
  auto msg = proto::DecodeControl(frame);
  if (!msg.ok()) {
    v1::ControlMessage reply;
    reply.set_sender("orchestrator");
    *reply.mutable_error() = proto::ToWireError(msg.status());
    return CheckSent(peer.identity, reply);
  }
  if (peer.has_role) {
    if (Status allowed = AuthorizeControl(*msg, &peer.role); !allowed.ok()) {
      v1::ControlMessage reply;
      reply.set_sender("orchestrator");
      reply.set_request_id(msg->request_id());
      *reply.mutable_error() = proto::ToWireError(allowed);
      return CheckSent(peer.identity, reply);
    }
  }
  o.Handle(peer.identity, *msg, peer.key);
}

void Setup(Orchestrator& o, ManualClock& clock, uint8_t flags) {
  if ((flags & 1) == 0) return;
  uint64_t rid = 0;
  auto send = [&](int region, v1::ControlMessage m) {
    m.set_request_id(++rid);
    o.Handle(kIdentities[region], m, PeerKey{});
  };
  for (int r = 0; r < 3; ++r) {
    v1::ControlMessage reg;
    reg.mutable_register_region()->set_region(kRegions[r]);
    reg.mutable_register_region()->mutable_capacity()->set_workers(4);
    send(r, reg);
    v1::ControlMessage hb;
    hb.mutable_heartbeat()->set_region(kRegions[r]);
    hb.mutable_heartbeat()->set_healthy(true);
    send(r, hb);
  }
  if ((flags & 2) == 0) return;
  v1::JobSpec spec = DefaultJobSpec();
  spec.set_rounds(3);
  spec.set_min_regions(2);
  v1::ControlMessage submit;
  *submit.mutable_submit_job()->mutable_spec() = spec;
  submit.set_request_id(++rid);
  o.Handle("cli", submit, PeerKey{});
  for (int r = 0; r < 3; ++r) {
    v1::ControlMessage ready;
    ready.mutable_job_ready()->set_job_id("job-000001");
    ready.mutable_job_ready()->set_region(kRegions[r]);
    ready.mutable_job_ready()->mutable_endpoint()->add_shard_endpoints(std::string("tcp://127.0.0.1:1/") + kRegions[r]);
    send(r, ready);
  }
  clock.Advance(10ms);
  o.Tick();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::InitializeQuietly(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  fuzz::Reader in(data, size);
  const uint8_t flags = in.U8();

  ManualClock clock;
  auto store = StateStore::Open(StatePath());
  if (!store.ok()) __builtin_trap();  // the harness, not the input
  if (!UseStateFile()) (*store)->SetCheckpointOnCommit(false);
  OrchestratorOptions options;
  options.timeouts.heartbeat_interval = 100ms;
  options.timeouts.heartbeat_misses = 3;
  options.timeouts.link_io = 500ms;
  options.timeouts.collective = 2s;
  options.timeouts.round = 5s;
  auto created = Orchestrator::Create(store->get(), clock, options, nullptr, CheckSent);
  if (!created.ok()) __builtin_trap();
  Orchestrator& o = **created;

  Setup(o, clock, flags);
  for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
    const uint8_t op = in.U8();
    const uint16_t n = in.U16();
    const Peer peer = MakePeer(op);
    switch (op & 3) {
      case 0:
        Deliver(o, peer, in.Bytes(n));
        break;
      case 1:
        Deliver(o, peer, fuzz::WrapFrame(in.Bytes(n)));
        break;
      case 2: {
        const std::string_view bytes = in.Bytes(n);
        v1::ControlMessage msg;
        if (!msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) break;
        Deliver(o, peer, proto::EncodeControl(std::move(msg)));  // stamps protocol_version 1
        break;
      }
      default:
        clock.Advance(std::chrono::milliseconds(10) * n);
        o.Tick();
        continue;
    }
    if (op & 0x40) o.Tick();
  }
  return 0;
}
