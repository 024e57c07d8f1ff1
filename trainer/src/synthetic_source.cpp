// The synthetic DataSource: samples Markov chains (see data.h for the IID and
// non-IID definitions).
#include "data_sources.h"

#include <deque>

#include "longhaul/trainer/markov_chain.h"
#include "split_mix.h"

namespace longhaul::trainer {
namespace {

constexpr int kBurnIn = 64;  // steps from a random state before bytes are used

class SyntheticSource final : public DataSource {
 public:
  SyntheticSource(MarkovChain global, MarkovChain train, double floor, uint64_t seed,
                  uint64_t stream_seed)
      : global_(std::move(global)), train_(std::move(train)), floor_(floor), seed_(seed),
        rng_(stream_seed) {
    state_ = static_cast<uint32_t>(rng_.Below(train_.num_states()));
    for (int i = 0; i < kBurnIn; ++i) Advance();
  }

  Batch NextTrain(int batch_size, int context) override {
    Batch batch{batch_size, context, {}, {}};
    batch.inputs.reserve(static_cast<size_t>(batch_size) * context);
    while (history_.size() < static_cast<size_t>(context)) Advance();
    for (int b = 0; b < batch_size; ++b) {
      batch.inputs.insert(batch.inputs.end(), history_.end() - context, history_.end());
      batch.targets.push_back(Advance());
    }
    return batch;
  }

  Batch Validation(int batch_size, int context, int index) override {
    Batch batch{batch_size, context, {}, {}};
    std::vector<uint8_t> seq(kBurnIn + context + 1);
    for (int b = 0; b < batch_size; ++b) {
      SplitMix rng(MixSeed(seed_, 0x76616c6964ULL, static_cast<uint64_t>(index), b));
      uint32_t state = static_cast<uint32_t>(rng.Below(global_.num_states()));
      for (auto& byte : seq) {
        byte = global_.Sample(state, rng.NextDouble());
        state = global_.NextState(state, byte);
      }
      batch.inputs.insert(batch.inputs.end(), seq.end() - context - 1, seq.end() - 1);
      batch.targets.push_back(seq.back());
    }
    return batch;
  }

  double LossFloor() const override { return floor_; }

 private:
  uint8_t Advance() {
    const uint8_t byte = train_.Sample(state_, rng_.NextDouble());
    state_ = train_.NextState(state_, byte);
    history_.push_back(byte);
    if (history_.size() > kMaxHistory) history_.pop_front();
    return byte;
  }

  static constexpr size_t kMaxHistory = 4096;  // ModelConfig caps context at 4096
  MarkovChain global_;
  MarkovChain train_;
  double floor_;
  uint64_t seed_;
  SplitMix rng_;
  uint32_t state_ = 0;
  std::deque<uint8_t> history_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> MakeSyntheticSource(const DataOptions& o, uint32_t region,
                                                        uint32_t worker) {
  LONGHAUL_ASSIGN_OR_RETURN(MarkovChain global, MarkovChain::Random(o.seed, o.order, o.branching));
  LONGHAUL_ASSIGN_OR_RETURN(double floor, global.EntropyRate());
  MarkovChain train = o.non_iid ? global.Perturbed(MixSeed(o.seed, 0x72656769ULL, region), o.non_iid_strength)
                                : global;
  const uint64_t stream = MixSeed(o.seed, 0x747261696eULL, region, worker);
  return std::unique_ptr<DataSource>(
      new SyntheticSource(std::move(global), std::move(train), floor, o.seed, stream));
}

}  // namespace longhaul::trainer
