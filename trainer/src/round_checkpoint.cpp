// Round checkpoints: file naming, the every-K schedule, pruning, latest lookup; and
// the mapping between the model's flat vector and named tensors.
#include <algorithm>
#include <cstdio>

#include "longhaul/trainer/checkpoint.h"

namespace longhaul::trainer {

std::vector<NamedTensor> TensorsOver(const std::vector<TensorView>& views, std::span<const float> flat,
                                     const std::string& prefix) {
  std::vector<NamedTensor> out;
  for (const TensorView& t : views) out.push_back({prefix + t.name, t.shape, flat.subspan(t.offset, t.numel)});
  return out;
}

Status LoadTensors(const LoadedSafetensors& file, const std::vector<TensorView>& views, std::span<float> flat,
                   const std::string& prefix) {
  for (const TensorView& t : views) {
    if (t.offset + t.numel > flat.size())
      return InvalidArgument("load tensors: '" + t.name + "' ends at " + std::to_string(t.offset + t.numel) +
                             ", past the " + std::to_string(flat.size()) + " floats of the target");
    const LoadedTensor* lt = file.Find(prefix + t.name);
    if (!lt) return NotFound("checkpoint has no tensor '" + prefix + t.name + "'");
    if (lt->shape != t.shape || lt->data.size() != t.numel)
      return InvalidArgument("checkpoint tensor '" + prefix + t.name + "' has a different shape than the model");
    std::copy(lt->data.begin(), lt->data.end(), flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  return Status::Ok();
}

std::vector<NamedTensor> ModelTensors(const ByteLM& model, std::span<const float> flat,
                                      const std::string& prefix) {
  return TensorsOver(model.tensors(), flat, prefix);
}

Status LoadModelTensors(const LoadedSafetensors& file, const ByteLM& model, std::span<float> flat,
                        const std::string& prefix) {
  if (flat.size() != model.num_params())
    return InvalidArgument("load model tensors: target has " + std::to_string(flat.size()) +
                           " floats, model has " + std::to_string(model.num_params()));
  return LoadTensors(file, model.tensors(), flat, prefix);
}

Status RoundCheckpointOptions::Validate() const {
  if (dir.empty()) return InvalidArgument("checkpoint options: 'dir' is empty");
  if (every_rounds < 1) return InvalidArgument("checkpoint options: 'every_rounds' must be >= 1, got 0");
  return Status::Ok();
}

std::filesystem::path RoundCheckpointer::PathFor(uint64_t round) const {
  char name[64];
  std::snprintf(name, sizeof(name), "round-%08llu.safetensors", static_cast<unsigned long long>(round));
  return options_.dir / name;
}

Result<std::vector<uint64_t>> RoundCheckpointer::ListRounds() const {
  std::vector<uint64_t> rounds;
  std::error_code ec;
  if (!std::filesystem::exists(options_.dir, ec)) return rounds;
  for (const auto& entry : std::filesystem::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    unsigned long long r = 0;
    char tail[32] = {0};
    if (std::sscanf(name.c_str(), "round-%llu.%31s", &r, tail) == 2 && std::string(tail) == "safetensors" &&
        name == PathFor(r).filename().string())
      rounds.push_back(r);
  }
  if (ec) return Unavailable("listing checkpoint dir '" + options_.dir.string() + "': " + ec.message());
  std::sort(rounds.begin(), rounds.end());
  return rounds;
}

Status RoundCheckpointer::MaybeWrite(uint64_t round, const std::vector<NamedTensor>& tensors,
                                     std::map<std::string, std::string> metadata) {
  LONGHAUL_RETURN_IF_ERROR(options_.Validate());
  if (!Due(round)) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) return Unavailable("creating checkpoint dir '" + options_.dir.string() + "': " + ec.message());
  metadata["round"] = std::to_string(round);
  LONGHAUL_RETURN_IF_ERROR(WriteSafetensors(PathFor(round), tensors, metadata));
  if (options_.keep_last == 0) return Status::Ok();
  LONGHAUL_ASSIGN_OR_RETURN(std::vector<uint64_t> rounds, ListRounds());
  while (rounds.size() > options_.keep_last) {
    std::filesystem::remove(PathFor(rounds.front()), ec);
    rounds.erase(rounds.begin());
  }
  return Status::Ok();
}

Result<std::optional<std::pair<uint64_t, LoadedSafetensors>>> RoundCheckpointer::LoadLatest(
    std::vector<std::string>* skipped) const {
  LONGHAUL_RETURN_IF_ERROR(options_.Validate());
  LONGHAUL_ASSIGN_OR_RETURN(std::vector<uint64_t> rounds, ListRounds());
  for (auto it = rounds.rbegin(); it != rounds.rend(); ++it) {
    Result<LoadedSafetensors> file = ReadSafetensors(PathFor(*it));
    if (file.ok()) return std::optional<std::pair<uint64_t, LoadedSafetensors>>(std::make_pair(*it, std::move(file).value()));
    if (skipped) skipped->push_back(file.status().ToString());
  }
  return std::optional<std::pair<uint64_t, LoadedSafetensors>>();
}

}  // namespace longhaul::trainer
