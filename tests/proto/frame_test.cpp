#include <catch2/catch.hpp>

#include <random>

#include "longhaul/proto/frame.h"

using namespace longhaul;
using longhaul::proto::DecodeControl;
using longhaul::proto::EncodeControl;

namespace {
v1::ControlMessage SampleSubmit() {
  v1::ControlMessage msg;
  msg.set_sender("cli");
  msg.set_request_id(42);
  auto* spec = msg.mutable_submit_job()->mutable_spec();
  spec->set_name("diloco-int8");
  spec->set_model_preset("tiny");
  spec->set_region_count(3);
  spec->set_rounds(20);
  spec->mutable_sync()->set_kind("diloco");
  spec->mutable_sync()->set_inner_steps(50);
  spec->mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  spec->mutable_data()->mutable_synthetic()->set_seed(7);
  return msg;
}
}  // namespace

TEST_CASE("A control message survives encode and decode unchanged", "[proto]") {
  v1::ControlMessage sent = SampleSubmit();
  auto got = DecodeControl(EncodeControl(sent));
  REQUIRE(got.ok());
  REQUIRE(got->protocol_version() == proto::kProtocolVersion);
  REQUIRE(got->sender() == "cli");
  REQUIRE(got->request_id() == 42);
  REQUIRE(got->submit_job().spec().name() == "diloco-int8");
  REQUIRE(got->submit_job().spec().sync().inner_steps() == 50);
  REQUIRE(got->submit_job().spec().compression().codec() == v1::CODEC_INT8_BLOCK);
  REQUIRE(proto::BodyName(*got) == "submit_job");
}

TEST_CASE("A data-plane chunk header round-trips", "[proto]") {
  v1::DataFrame frame;
  auto* chunk = frame.mutable_chunk();
  chunk->set_job_id("j1");
  chunk->set_round(3);
  chunk->set_epoch(2);
  chunk->set_shard(1);
  chunk->set_offset(1 << 20);
  chunk->set_length(65536);
  chunk->set_codec(v1::CODEC_FP4_E3M0);
  chunk->set_checksum(0xdeadbeefcafeULL);
  auto got = proto::DecodeData(proto::EncodeData(frame));
  REQUIRE(got.ok());
  REQUIRE(got->chunk().offset() == (1 << 20));
  REQUIRE(got->chunk().checksum() == 0xdeadbeefcafeULL);
  REQUIRE(got->chunk().codec() == v1::CODEC_FP4_E3M0);
}

TEST_CASE("Random garbage is refused, never parsed", "[proto]") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string junk(rng() % 200, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    if (trial % 2 == 0 && junk.size() >= 4) junk.replace(0, 4, "LHF1");  // right magic, wrong rest
    auto got = DecodeControl(junk);
    REQUIRE_FALSE(got.ok());
    REQUIRE((got.status().code() == StatusCode::kDataLoss ||
             got.status().code() == StatusCode::kResourceExhausted));
  }
}

TEST_CASE("A flipped payload bit or a truncated frame is detected", "[proto]") {
  std::string frame = EncodeControl(SampleSubmit());
  std::string flipped = frame;
  flipped[flipped.size() / 2 + 8] ^= 0x10;
  auto a = DecodeControl(flipped);
  REQUIRE(a.status().code() == StatusCode::kDataLoss);
  REQUIRE(a.status().message().find("checksum") != std::string::npos);

  auto b = DecodeControl(frame.substr(0, frame.size() - 3));
  REQUIRE(b.status().code() == StatusCode::kDataLoss);
}

TEST_CASE("An oversized frame is refused before parsing", "[proto]") {
  std::string frame = EncodeControl(SampleSubmit());
  // Claim a 1 GiB payload in the header.
  frame[4] = 0; frame[5] = 0; frame[6] = 0; frame[7] = 0x40;
  auto got = DecodeControl(frame);
  REQUIRE(got.status().code() == StatusCode::kResourceExhausted);
  REQUIRE(got.status().message().find("exceeds the limit") != std::string::npos);
}

TEST_CASE("A different protocol version is refused with both versions named", "[proto]") {
  v1::ControlMessage msg = SampleSubmit();
  msg.set_protocol_version(2);
  auto got = DecodeControl(proto::EncodeFrame(msg));  // EncodeFrame keeps the version as set
  REQUIRE(got.status().code() == StatusCode::kVersionMismatch);
  REQUIRE(got.status().message().find("version 2") != std::string::npos);
  REQUIRE(got.status().message().find("version 1") != std::string::npos);
}

TEST_CASE("A message without a body is refused", "[proto]") {
  v1::ControlMessage msg;
  msg.set_sender("x");
  auto got = DecodeControl(EncodeControl(msg));
  REQUIRE(got.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Status round-trips through the wire error", "[proto]") {
  Status s = PermissionDenied("key abc is not on the allowlist");
  Status back = proto::FromWireError(proto::ToWireError(s));
  REQUIRE(back.code() == StatusCode::kPermissionDenied);
  REQUIRE(back.message() == s.message());
}
