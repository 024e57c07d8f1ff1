// Hostile and broken input on the data plane: garbage, truncated and oversized
// frames, corrupted chunks. A raw DEALER with an allowlisted key plays the peer.
#include <thread>

#include "longhaul/common/checksum.h"
#include "longhaul/proto/frame.h"
#include "wan_transport/wan_test_util.h"

using namespace longhaul;
using namespace longhaul::wan_transport;
using namespace longhaul::wan_transport::testing;
using namespace std::chrono_literals;

namespace {

struct RawPeer {
  zmq::context_t ctx;
  zmq::socket_t s{ctx, zmq::socket_type::dealer};
  RawPeer(const Cluster& c, int self, bool encryption = true) {
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 2000);
    if (encryption) MakeCurveClient(s, c.keys[self], c.keys[0].public_key);
    s.connect(c.eps[0]->endpoint());
  }
  void Send(const std::string& header, std::string_view payload) {
    s.send(zmq::buffer(header), zmq::send_flags::sndmore);
    s.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  Result<v1::ChunkControl> Control() {
    zmq::message_t m;
    if (!s.recv(m)) return DeadlineExceeded("no control");
    auto f = proto::DecodeData(m.to_string_view());
    if (!f.ok()) return f.status();
    return f->control();
  }
};

std::string ChunkHeader(std::string_view payload, uint64_t checksum, uint32_t seq = 0) {
  v1::DataFrame f;
  auto* h = f.mutable_chunk();
  h->set_job_id("job");
  h->set_round(1);
  h->set_epoch(1);
  h->set_shard(1);
  h->set_transfer_id(99 + seq);
  h->set_fragment(seq);
  h->set_length(static_cast<uint32_t>(payload.size()));
  h->set_total_bytes(payload.size());
  h->set_chunk_count(1);
  h->set_checksum(checksum);
  return proto::EncodeData(std::move(f));
}

}  // namespace

TEST_CASE("garbage, truncated and oversized frames are dropped and the endpoint keeps working") {
  Cluster c(2);
  auto link = c.eps[0]->Join(c.Spec(0));
  REQUIRE(link.ok());
  RawPeer peer(c, 1);
  std::string payload = "hello world";
  std::string good = ChunkHeader(payload, Checksum64(payload));

  peer.s.send(zmq::str_buffer("not a frame at all"), zmq::send_flags::none);     // one frame, garbage
  peer.Send("LHF1 but truncated", payload);                                      // bad header frame
  peer.Send(good.substr(0, good.size() - 3), payload);                           // truncated header
  peer.Send(good, payload.substr(0, 5));                                         // truncated payload
  v1::DataFrame huge;
  huge.mutable_chunk()->set_job_id("job");
  huge.mutable_chunk()->set_total_bytes(uint64_t{1} << 40);
  huge.mutable_chunk()->set_chunk_count(1);
  peer.Send(proto::EncodeData(huge), "x");                                       // absurd size
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (c.eps[0]->dropped_frames() < 5 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  CHECK(c.eps[0]->dropped_frames() == 5);

  peer.Send(good, payload);  // a valid message after all that still arrives
  auto got = (*link)->Recv(1, 0, DeadlineAfter(2s));
  REQUIRE(got.ok());
  CHECK(std::string(reinterpret_cast<const char*>(got->data()), got->size()) == payload);
  auto ack = peer.Control();
  REQUIRE(ack.ok());
  CHECK(ack->acked_bytes() == payload.size());
}

// Only a plaintext link can corrupt bytes unnoticed; its chunks carry XXH3.
TEST_CASE("a corrupted chunk on a plaintext link is re-requested, and fails the transfer after repeated corruption") {
  WanOptions plain;
  plain.encryption = false;
  Cluster c(2, plain);
  auto link = c.eps[0]->Join(c.Spec(0));
  REQUIRE(link.ok());
  RawPeer peer(c, 1, /*encryption=*/false);
  std::string payload = "tensor bytes";
  std::string corrupt = payload;
  corrupt[3] ^= 0x20;
  std::string header = ChunkHeader(payload, Checksum64(payload));

  SECTION("resent intact after one corruption: delivered") {
    peer.Send(header, corrupt);
    auto resend = peer.Control();
    REQUIRE(resend.ok());
    REQUIRE(resend->resend_chunks_size() == 1);
    CHECK(resend->resend_chunks(0) == 0);
    peer.Send(header, payload);
    auto got = (*link)->Recv(1, 0, DeadlineAfter(2s));
    REQUIRE(got.ok());
    CHECK(got->size() == payload.size());
  }
  SECTION("corrupted every time: kDataLoss, never a partial message") {
    for (int i = 0; i <= kMaxResends; ++i) {
      peer.Send(header, corrupt);
      REQUIRE(peer.Control().ok());
    }
    auto got = (*link)->Recv(1, 0, DeadlineAfter(2s));
    CHECK(got.status().code() == StatusCode::kDataLoss);
  }
}

// On a CURVE link ZeroMQ verifies each message's Poly1305 tag before handing it
// over, so the chunk checksum is neither sent nor checked (Integrity::kAuthenticatedLink).
TEST_CASE("chunks on a CURVE link carry no checksum and are delivered without one") {
  Cluster c(2);
  auto link = c.eps[0]->Join(c.Spec(0));
  REQUIRE(link.ok());
  RawPeer peer(c, 1);
  std::string payload = "authenticated by the link";
  peer.Send(ChunkHeader(payload, 0), payload);
  auto got = (*link)->Recv(1, 0, DeadlineAfter(2s));
  REQUIRE(got.ok());
  CHECK(std::string(reinterpret_cast<const char*>(got->data()), got->size()) == payload);
  auto ack = peer.Control();
  REQUIRE(ack.ok());
  CHECK(ack->acked_bytes() == payload.size());
}

TEST_CASE("a transfer that stops midway fails within link_io, not at the deadline") {
  WanOptions o;
  o.timeouts.link_io = 300ms;
  Cluster c(2, o);
  auto link = c.eps[0]->Join(c.Spec(0));
  REQUIRE(link.ok());
  RawPeer peer(c, 1);
  // Chunk 0 of 2 arrives; chunk 1 never does.
  std::string half(100, 'a');
  v1::DataFrame f;
  auto* h = f.mutable_chunk();
  h->set_job_id("job");
  h->set_round(1);
  h->set_epoch(1);
  h->set_shard(1);
  h->set_length(100);
  h->set_total_bytes(200);
  h->set_chunk_count(2);
  h->set_checksum(Checksum64(half));
  peer.Send(proto::EncodeData(f), half);
  // Unavailable naming the partial message (not DeadlineExceeded): the peer's
  // departure ended the wait, not the deadline.
  auto got = (*link)->Recv(1, 0, DeadlineAfter(10s));
  CHECK(got.status().code() == StatusCode::kUnavailable);
  CHECK(got.status().message().find("100 of 200") != std::string::npos);
}
