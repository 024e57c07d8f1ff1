// DataOptions validation and the MakeDataSource factory.
#include <cmath>
#include <string>

#include "data_sources.h"

namespace longhaul::trainer {

Status DataOptions::Validate() const {
  if (kind != "synthetic" && kind != "text")
    return InvalidArgument("data options: field 'kind' must be 'synthetic' or 'text', got '" + kind + "'");
  if (kind == "synthetic") {
    if (order != 1 && order != 2)
      return InvalidArgument("data options: field 'order' must be 1 or 2, got " + std::to_string(order));
    if (branching < 1 || branching > 256)
      return InvalidArgument("data options: field 'branching' must be in [1, 256], got " +
                             std::to_string(branching));
    if (!(non_iid_strength >= 0.0 && non_iid_strength <= 20.0))
      return InvalidArgument("data options: field 'non_iid_strength' must be in [0, 20], got " +
                             std::to_string(non_iid_strength));
  } else {
    if (text_path.empty()) return InvalidArgument("data options: kind 'text' needs 'text_path'");
    if (!(validation_fraction > 0.0 && validation_fraction <= 0.5))
      return InvalidArgument("data options: field 'validation_fraction' must be in (0, 0.5], got " +
                             std::to_string(validation_fraction));
  }
  return Status::Ok();
}

Result<std::unique_ptr<DataSource>> MakeDataSource(const DataOptions& options,
                                                   uint32_t region_index, uint32_t region_count,
                                                   uint32_t worker_rank, uint32_t workers) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  if (region_count < 1 || region_index >= region_count)
    return InvalidArgument("data source: region index " + std::to_string(region_index) +
                           " out of range for " + std::to_string(region_count) + " regions");
  if (workers < 1 || worker_rank >= workers)
    return InvalidArgument("data source: worker rank " + std::to_string(worker_rank) +
                           " out of range for " + std::to_string(workers) + " workers");
  if (options.kind == "synthetic") return MakeSyntheticSource(options, region_index, worker_rank);
  return MakeTextSource(options, region_index, region_count, worker_rank, workers);
}

Status CheckModelCoversData(const ModelConfig& model, const DataOptions& data) {
  if (data.kind == "synthetic" && static_cast<uint32_t>(model.context) < data.order)
    return InvalidArgument("model context " + std::to_string(model.context) +
                           " is shorter than the Markov order " + std::to_string(data.order) +
                           ": the loss floor is unreachable");
  return Status::Ok();
}

}  // namespace longhaul::trainer
