// RegionReplica checkpoints: theta as the trainer's named tensors ("params.*") and
// the outer state as one full-length tensor ("outer.state", aligned with the
// flat parameter vector, see ShardLayout), so a checkpoint restores into any
// number of workers per region.
#include <charconv>

#include "longhaul/common/checksum.h"

#include "longhaul/worker/region_replica.h"

namespace longhaul::worker {
namespace {
constexpr const char* kOuterState = "outer.state";
constexpr const char* kParamsPrefix = "params.";
}  // namespace

std::vector<trainer::TensorView> RegionReplica::Tensors() const {
  if (!options_.tensors.empty()) return options_.tensors;
  return {{.name = "flat", .shape = {static_cast<int64_t>(theta_.size())}, .offset = 0, .numel = theta_.size()}};
}

std::vector<float> RegionReplica::OuterState() const {
  std::vector<float> out;
  for (const auto& o : outer_) out.insert(out.end(), o->state().begin(), o->state().end());
  return out;
}

Status RegionReplica::LoadState(std::span<const float> theta, std::span<const float> outer_state) {
  if (round_ && round_->step > 0) {
    return FailedPrecondition("the outer state can be loaded only between rounds (round " +
                              std::to_string(round_->inputs.round) + " is at inner step " +
                              std::to_string(round_->step) + ")");
  }
  if (theta.size() != theta_.size()) {
    return InvalidArgument("theta has " + std::to_string(theta.size()) + " floats; the job's parameters are " +
                           std::to_string(theta_.size()));
  }
  size_t expected = 0;
  for (const auto& o : outer_) expected += o->state().size();
  if (outer_state.size() != expected) {
    return InvalidArgument("outer state has " + std::to_string(outer_state.size()) + " floats; this worker keeps " +
                           std::to_string(expected));
  }
  size_t at = 0;
  for (auto& o : outer_) {
    const size_t n = o->state().size();
    LONGHAUL_RETURN_IF_ERROR(o->LoadState(outer_state.subspan(at, n)));
    at += n;
  }
  std::copy(theta.begin(), theta.end(), theta_.begin());
  std::copy(theta.begin(), theta.end(), local_.begin());
  LONGHAUL_RETURN_IF_ERROR(LocalToDevice());
  if (round_) Snapshot(round_->before);
  return Status::Ok();
}

Status RegionReplica::WriteCheckpoint(const std::filesystem::path& path, std::map<std::string, std::string> metadata) {
  const bool has_state = !outer_.empty() && outer_[0]->state().size() == layout_.Piece(0).size() &&
                         layout_.Piece(0).size() > 0;
  std::vector<float> state;
  if (has_state) {
    state.assign(theta_.size(), 0.0f);
    for (uint32_t f = 0; f < layout_.fragments(); ++f) {
      LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, f, outer_[f]->state(), state, gather_scratch_));
    }
  }
  if (group_.rank() != 0) return Status::Ok();
  std::vector<trainer::NamedTensor> tensors = trainer::TensorsOver(Tensors(), theta_, kParamsPrefix);
  if (has_state) tensors.push_back({kOuterState, {static_cast<int64_t>(state.size())}, state});
  metadata["outer_optimizer"] = outer_.empty() ? "" : outer_[0]->options().name;
  metadata["fragments"] = std::to_string(layout_.fragments());
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Unavailable("cannot create checkpoint folder " + path.parent_path().string() + ": " + ec.message());
  return trainer::WriteSafetensors(path, tensors, metadata);
}

Result<uint32_t> RegionReplica::RestoreCheckpoint(const std::filesystem::path& path) {
  auto file = trainer::ReadSafetensors(path);
  if (!file.ok()) return file.status();
  std::vector<float> theta(theta_.size());
  LONGHAUL_RETURN_IF_ERROR(trainer::LoadTensors(*file, Tensors(), theta, kParamsPrefix)
                               .WithContext("checkpoint " + path.string()));
  if (auto it = file->metadata.find("param_hash"); it != file->metadata.end() && it->second != ParameterHash(theta)) {
    return DataLoss("checkpoint " + path.string() + ": its parameters hash to " + ParameterHash(theta) +
                    " but it records " + it->second.substr(0, 40) + " (the file was altered or damaged)");
  }
  uint32_t round = 0;
  if (auto it = file->metadata.find("round"); it != file->metadata.end()) {
    const auto& s = it->second;
    if (std::from_chars(s.data(), s.data() + s.size(), round).ec != std::errc()) {
      return DataLoss("checkpoint " + path.string() + ": metadata round '" + s + "' is not a number");
    }
  }
  if (auto it = file->metadata.find("fragments");
      it != file->metadata.end() && it->second != std::to_string(layout_.fragments())) {
    return InvalidArgument("checkpoint " + path.string() + " was written with " + it->second +
                           " fragments; this job uses " + std::to_string(layout_.fragments()));
  }
  const trainer::LoadedTensor* state = file->Find(kOuterState);
  for (uint32_t f = 0; f < layout_.fragments(); ++f) {
    if (outer_[f]->state().empty()) continue;
    if (state == nullptr) continue;  // written by an optimizer without state: start at zero
    if (state->data.size() != theta_.size()) {
      return DataLoss("checkpoint " + path.string() + ": outer.state has " + std::to_string(state->data.size()) +
                      " floats, expected " + std::to_string(theta_.size()));
    }
    const ShardPiece p = layout_.Piece(f);
    LONGHAUL_RETURN_IF_ERROR(outer_[f]->LoadState(std::span<const float>(state->data).subspan(p.begin, p.size())));
  }
  theta_ = std::move(theta);
  std::copy(theta_.begin(), theta_.end(), local_.begin());
  LONGHAUL_RETURN_IF_ERROR(LocalToDevice());
  if (pending_) Release(std::move(*pending_));
  pending_.reset();
  committed_round_ = round;
  restored_ = true;  // the trainer's step follows the job's at the first round (BeginRound)
  return round;
}

}  // namespace longhaul::worker
