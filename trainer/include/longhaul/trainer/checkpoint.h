// Checkpoints as safetensors files, loadable by the Python ecosystem as they are.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian header
// length N, N bytes of JSON header, then the raw little-endian tensor data. The header
// maps each tensor name to {"dtype": "F32", "shape": [...], "data_offsets": [begin,
// end)} (byte offsets relative to the data section, contiguous, no gaps) and may hold
// "__metadata__": {string: string}. The header is padded with spaces to a multiple of
// 8 bytes, as the Python writer does. Only F32 is written or accepted.
//
// Writes are atomic: a temporary file in the same directory, fsync, rename, fsync of
// the directory; a crash leaves either the old file or the new one.
//
// Round checkpoints (global parameters + outer-optimizer state at a committed round)
// are one file per round, "round-<%08d>.safetensors", written every K rounds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/model.h"

namespace longhaul::trainer {

// A tensor to write: borrowed data, numel == product(shape) (1 for shape []).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

struct LoadedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct LoadedSafetensors {
  std::map<std::string, std::string> metadata;
  std::vector<LoadedTensor> tensors;  // in file (data offset) order
  const LoadedTensor* Find(std::string_view name) const;
};

// kInvalidArgument for bad tensors (empty or duplicate name, "__metadata__", size not
// matching shape); kUnavailable/kInternal for I/O failures, naming the path.
Status WriteSafetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata);
// kNotFound if missing; kDataLoss naming the problem for a truncated or corrupt file
// (header length beyond the file, bad JSON, unknown dtype, offsets out of bounds,
// overlapping or gapped data, shape not matching the byte count).
Result<LoadedSafetensors> ReadSafetensors(const std::filesystem::path& path);

// The tensors `views` lays out over `flat` (e.g. the global parameters), names
// prefixed with `prefix` (e.g. "params.").
std::vector<NamedTensor> TensorsOver(const std::vector<TensorView>& views, std::span<const float> flat,
                                     const std::string& prefix = "");
// Copies the tensors named prefix + view name from `file` into `flat`, checking
// every name and shape.
Status LoadTensors(const LoadedSafetensors& file, const std::vector<TensorView>& views, std::span<float> flat,
                   const std::string& prefix = "");

// The model's tensors over `flat` (num_params floats, e.g. the global parameters),
// names prefixed with `prefix` (e.g. "params.").
std::vector<NamedTensor> ModelTensors(const ByteLM& model, std::span<const float> flat,
                                      const std::string& prefix = "");
// Copies the tensors named prefix + model tensor name from `file` into `flat`,
// checking every name and shape.
Status LoadModelTensors(const LoadedSafetensors& file, const ByteLM& model, std::span<float> flat,
                        const std::string& prefix = "");

struct RoundCheckpointOptions {
  std::filesystem::path dir;
  uint64_t every_rounds = 10;  // K: write at committed rounds divisible by K
  uint32_t keep_last = 3;      // older round files are deleted (0 keeps all)
  Status Validate() const;
};

// Writes round checkpoints every K rounds and finds the latest one to restore from.
class RoundCheckpointer {
 public:
  explicit RoundCheckpointer(RoundCheckpointOptions options) : options_(std::move(options)) {}
  bool Due(uint64_t round) const { return round % options_.every_rounds == 0; }
  // When Due(round): writes `tensors` (global params and outer state, named by the
  // caller) with metadata plus "round", then prunes old files. Otherwise does nothing.
  Status MaybeWrite(uint64_t round, const std::vector<NamedTensor>& tensors,
                    std::map<std::string, std::string> metadata);
  std::filesystem::path PathFor(uint64_t round) const;
  // The highest round with a readable file in dir; nullopt if none. Corrupt newer
  // files are skipped (reported in `skipped` when given).
  Result<std::optional<std::pair<uint64_t, LoadedSafetensors>>> LoadLatest(
      std::vector<std::string>* skipped = nullptr) const;

 private:
  Result<std::vector<uint64_t>> ListRounds() const;
  RoundCheckpointOptions options_;
};

}  // namespace longhaul::trainer
