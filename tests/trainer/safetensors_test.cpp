// safetensors: round trip, the header Python expects, corrupt files, round checkpoints.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "longhaul/trainer/checkpoint.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace longhaul::trainer;

namespace {


std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("trainer: safetensors round trip keeps names, shapes, data and metadata", "[trainer][safetensors]") {
  const longhaul::testing::TempDir tmp("safetensors-rt");
  const auto& dir = tmp.path();
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f}, c = {3.25f};
  const auto path = dir / "x.safetensors";
  REQUIRE(WriteSafetensors(path, {{"a", {2, 3}, a}, {"b", {1}, b}, {"scalar", {}, c}},
                           {{"round", "7"}, {"job", "j1"}}).ok());
  auto loaded = ReadSafetensors(path);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->tensors.size() == 3);
  REQUIRE(loaded->Find("a") != nullptr);
  CHECK(loaded->Find("a")->shape == std::vector<int64_t>{2, 3});
  CHECK(loaded->Find("a")->data == a);
  CHECK(loaded->Find("b")->data == b);
  CHECK(loaded->Find("scalar")->shape.empty());
  CHECK(loaded->Find("scalar")->data == c);
  CHECK(loaded->metadata.at("round") == "7");
  CHECK(loaded->metadata.at("job") == "j1");
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp." + std::to_string(::getpid())));
}

TEST_CASE("trainer: safetensors header is what Python's safetensors expects", "[trainer][safetensors]") {
  const longhaul::testing::TempDir tmp("safetensors-hdr");
  const auto& dir = tmp.path();
  std::vector<float> w(12, 1.5f), bias(4, -1.0f);
  const auto path = dir / "m.safetensors";
  REQUIRE(WriteSafetensors(path, {{"layer.weight", {3, 4}, w}, {"layer.bias", {4}, bias}}, {{"k", "v"}}).ok());
  const std::string bytes = ReadFile(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  CHECK(n % 8 == 0);  // the Python writer pads to 8 bytes
  REQUIRE(8 + n + (12 + 4) * 4 == bytes.size());
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["__metadata__"]["k"] == "v");
  CHECK(header["layer.weight"]["dtype"] == "F32");
  CHECK(header["layer.weight"]["shape"] == nlohmann::json::array({3, 4}));
  CHECK(header["layer.weight"]["data_offsets"] == nlohmann::json::array({0, 48}));
  CHECK(header["layer.bias"]["shape"] == nlohmann::json::array({4}));
  CHECK(header["layer.bias"]["data_offsets"] == nlohmann::json::array({48, 64}));
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);  // little-endian f32 data
  CHECK(first == 1.5f);
}

TEST_CASE("trainer: corrupt or truncated safetensors files are rejected with the reason", "[trainer][safetensors]") {
  const longhaul::testing::TempDir tmp("safetensors-bad");
  const auto& dir = tmp.path();
  std::vector<float> w(8, 2.0f);
  const auto good = dir / "good.safetensors";
  REQUIRE(WriteSafetensors(good, {{"w", {8}, w}}, {}).ok());
  const std::string bytes = ReadFile(good);
  const auto bad = dir / "bad.safetensors";
  auto expect = [&](const std::string& content, const std::string& needle) {
    WriteFile(bad, content);
    auto r = ReadSafetensors(bad);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().ToString());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message().find(needle) != std::string::npos);
  };
  expect(bytes.substr(0, 5), "8-byte");
  expect(bytes.substr(0, bytes.size() - 4), "data section");  // truncated data
  std::string huge = bytes;
  huge[6] = 0x7f;
  expect(huge, "header length");
  std::string garbled = bytes;
  garbled[9] = '#';
  expect(garbled, "JSON");
  std::string dtype = bytes;
  dtype.replace(dtype.find("F32"), 3, "F64");
  expect(dtype, "dtype");
  std::string shape = bytes;
  shape.replace(shape.find("[8]"), 3, "[9]");
  expect(shape, "shape");
  CHECK(ReadSafetensors(dir / "missing.safetensors").status().code() == StatusCode::kNotFound);
  CHECK(WriteSafetensors(dir / "x", {{"w", {3}, w}}, {}).code() == StatusCode::kInvalidArgument);
  CHECK(WriteSafetensors(dir / "x", {{"w", {8}, w}, {"w", {8}, w}}, {}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("trainer: round checkpoints: every K rounds, keep the last N, restore the latest", "[trainer][safetensors]") {
  const longhaul::testing::TempDir tmp("safetensors-rounds");
  const auto& dir = tmp.path();
  ModelConfig cfg;
  cfg.context = 2;
  cfg.embed_dim = 2;
  cfg.hidden_dim = 3;
  cfg.hidden_layers = 1;
  ByteLM model(cfg);
  model.InitParams(3);
  std::vector<float> momentum(model.num_params(), 0.25f);
  RoundCheckpointer ckpt({dir, 2, 2});
  for (uint64_t round = 1; round <= 6; ++round) {
    model.params()[0] = static_cast<float>(round);
    auto tensors = ModelTensors(model, model.params(), "params.");
    tensors.push_back({"outer.momentum", {static_cast<int64_t>(momentum.size())}, momentum});
    REQUIRE(ckpt.MaybeWrite(round, tensors, {{"job", "j"}}).ok());
  }
  CHECK_FALSE(std::filesystem::exists(ckpt.PathFor(2)));
  CHECK(std::filesystem::exists(ckpt.PathFor(4)));
  CHECK_FALSE(std::filesystem::exists(ckpt.PathFor(5)));
  // A corrupt newest file is skipped in favour of the previous one.
  WriteFile(dir / "round-00000008.safetensors", "garbage!");
  std::vector<std::string> skipped;
  auto latest = ckpt.LoadLatest(&skipped);
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->first == 6);
  CHECK(skipped.size() == 1);
  ByteLM restored(cfg);
  REQUIRE(LoadModelTensors((*latest)->second, restored, restored.params(), "params.").ok());
  CHECK(restored.params()[0] == 6.0f);
  CHECK(std::equal(restored.params().begin() + 1, restored.params().end(), model.params().begin() + 1));
  CHECK((*latest)->second.Find("outer.momentum")->data == momentum);
  CHECK((*latest)->second.metadata.at("round") == "6");
  ByteLM other(*ModelPreset("tiny"));
  CHECK_FALSE(LoadModelTensors((*latest)->second, other, other.params(), "params.").ok());
}
