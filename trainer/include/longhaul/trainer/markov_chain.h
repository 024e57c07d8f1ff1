// MarkovChain: a sparse order-k Markov chain over bytes with an exactly known
// entropy rate, the synthetic data source's ground truth.
//
// State = the last `order` bytes (order 1: 256 states; order 2: 65536). Each state has
// `branching` successor bytes with probabilities. The entropy rate
//   h = sum_s pi(s) * H(P(. | s))
// (pi the stationary distribution) is the lowest mean cross-entropy any model can
// reach on an infinite stream, so training loss can be compared with it directly.
// pi is computed by power iteration on the lazy chain (I + P) / 2, which has the same
// stationary distribution but is aperiodic, so the iteration converges.
//
// Random chains are irreducible on their recurrent states: successor 0 of every state
// follows one random Hamiltonian cycle through all 256 bytes, so every state reaches
// the cycle and the stationary distribution is unique.
#pragma once

#include <cstdint>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::trainer {

class MarkovChain {
 public:
  // A random chain: successors as above, probabilities Dirichlet(1) per state.
  // order must be 1 or 2, branching in [1, 256].
  static Result<MarkovChain> Random(uint64_t seed, uint32_t order, uint32_t branching);
  // An explicit table: next[s * branching + j] is successor j of state s with
  // probability prob[s * branching + j]; each state's probabilities are >= 0 and sum
  // to 1 (within 1e-9). Used to test the entropy rate on hand-made chains.
  static Result<MarkovChain> FromTable(uint32_t order, uint32_t branching,
                                       std::vector<uint8_t> next, std::vector<double> prob);

  // The same successor structure with each probability scaled by exp(strength * u),
  // u uniform in [-1, 1) drawn from `seed`, then renormalised: a related but
  // different distribution (used for non-IID regions).
  MarkovChain Perturbed(uint64_t seed, double strength) const;

  // Entropy rate in nats/byte (power iteration to an L1 change below 1e-13).
  // kInternal if it does not converge within the iteration budget.
  Result<double> EntropyRate() const;
  // The stationary distribution over states, as computed for EntropyRate.
  Result<std::vector<double>> Stationary() const;

  uint32_t order() const { return order_; }
  uint32_t branching() const { return branching_; }
  uint32_t num_states() const { return order_ == 1 ? 256u : 65536u; }
  // Draws the byte following `state` using u in [0, 1).
  uint8_t Sample(uint32_t state, double u) const;
  uint32_t NextState(uint32_t state, uint8_t byte) const {
    return order_ == 1 ? byte : ((state & 0xffu) << 8) | byte;
  }

 private:
  MarkovChain(uint32_t order, uint32_t branching) : order_(order), branching_(branching) {}
  uint32_t order_;
  uint32_t branching_;
  std::vector<uint8_t> next_;
  std::vector<double> prob_;
};

}  // namespace longhaul::trainer
