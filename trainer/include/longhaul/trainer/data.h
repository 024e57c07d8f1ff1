// DataSource: where a worker's training bytes and the shared validation bytes come from.
//
// Two kinds:
//  - "synthetic": a random sparse Markov chain over bytes (markov_chain.h) whose
//    entropy rate is computed exactly, so LossFloor() is the best achievable loss.
//    Validation always samples the global chain (seed `seed`), so every region's
//    validation loss is comparable with the floor. Training:
//      IID (non_iid = false): every worker samples the global chain, each with its
//        own random stream (seeded by seed, region, worker).
//      non-IID: region r samples the global chain Perturbed(seed, r) with strength
//        `non_iid_strength`: same successor bytes, region-specific probabilities. Its
//        workers share that chain and differ only in their random stream. Averaged
//        over regions this stays close to the global chain, the DiLoCo setting of
//        heterogeneous shards of one task.
//  - "text": any file. The last `validation_fraction` of its bytes is the validation
//    range (the same everywhere); the rest is split into `region_count` contiguous
//    byte ranges, and each region's range into `workers` contiguous shards. A worker
//    walks its shard sequentially, wrapping; each byte is a target predicted from up
//    to `context` preceding bytes of the same shard (zero-padded at the shard start).
//
// Validation(batch, context, index) returns the same bytes for the same arguments in
// every process: fixed held-out batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "longhaul/common/status.h"
#include "longhaul/trainer/batch.h"
#include "longhaul/trainer/model.h"

namespace longhaul::trainer {

struct DataOptions {
  std::string kind = "synthetic";  // "synthetic" or "text"
  uint64_t seed = 1;               // chain seed (synthetic); validation sampling seed
  uint32_t branching = 4;          // successors per state (synthetic), [1, 256]
  uint32_t order = 1;              // Markov order (synthetic): 1 or 2
  bool non_iid = false;            // synthetic: per-region perturbed chains (see above)
  double non_iid_strength = 1.0;   // log-scale of the per-region perturbation, [0, 20]
  std::string text_path;           // text: the file to read
  double validation_fraction = 0.05;  // text: tail held out for validation, (0, 0.5]
  // Names the first bad field and its value.
  Status Validate() const;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  // The next training batch of this worker's stream.
  virtual Batch NextTrain(int batch_size, int context) = 0;
  // Held-out batch number `index` (>= 0), identical in every region and worker.
  virtual Batch Validation(int batch_size, int context, int index) = 0;
  // Entropy rate of the validation distribution in nats/byte (synthetic); 0 for text.
  virtual double LossFloor() const = 0;
};

// kInvalidArgument for bad options or indices; kNotFound naming the path when the
// text file does not exist; kInvalidArgument when it is too small to split.
Result<std::unique_ptr<DataSource>> MakeDataSource(const DataOptions& options,
                                                   uint32_t region_index, uint32_t region_count,
                                                   uint32_t worker_rank, uint32_t workers);

// A model can reach the synthetic floor only if its context covers the chain's order.
Status CheckModelCoversData(const ModelConfig& model, const DataOptions& data);

}  // namespace longhaul::trainer
