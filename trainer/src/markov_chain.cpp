// Random sparse Markov chains over bytes and their exact entropy rate.
#include "longhaul/trainer/markov_chain.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "split_mix.h"

namespace longhaul::trainer {

Result<MarkovChain> MarkovChain::Random(uint64_t seed, uint32_t order, uint32_t branching) {
  if (order != 1 && order != 2)
    return InvalidArgument("markov chain: 'order' must be 1 or 2, got " + std::to_string(order));
  if (branching < 1 || branching > 256)
    return InvalidArgument("markov chain: 'branching' must be in [1, 256], got " +
                           std::to_string(branching));
  MarkovChain chain(order, branching);
  SplitMix rng(MixSeed(seed, 0x6d61726b6f76ULL));  // "markov"
  // One random Hamiltonian cycle through all bytes: cycle_next[b] follows b.
  std::vector<uint8_t> perm(256);
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = 255; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
  std::vector<uint8_t> cycle_next(256);
  for (int i = 0; i < 256; ++i) cycle_next[perm[i]] = perm[(i + 1) % 256];

  const uint32_t states = chain.num_states();
  chain.next_.resize(static_cast<size_t>(states) * branching);
  chain.prob_.resize(chain.next_.size());
  std::vector<bool> used(256);
  for (uint32_t s = 0; s < states; ++s) {
    std::fill(used.begin(), used.end(), false);
    uint8_t* nx = &chain.next_[static_cast<size_t>(s) * branching];
    double* pr = &chain.prob_[static_cast<size_t>(s) * branching];
    nx[0] = cycle_next[s & 0xffu];
    used[nx[0]] = true;
    for (uint32_t j = 1; j < branching; ++j) {
      uint8_t b;
      do b = static_cast<uint8_t>(rng.Below(256)); while (used[b]);
      used[b] = true;
      nx[j] = b;
    }
    double sum = 0;
    for (uint32_t j = 0; j < branching; ++j) {
      pr[j] = -std::log(1.0 - rng.NextDouble());  // Exp(1): normalised -> Dirichlet(1)
      sum += pr[j];
    }
    for (uint32_t j = 0; j < branching; ++j) pr[j] /= sum;
  }
  return chain;
}

Result<MarkovChain> MarkovChain::FromTable(uint32_t order, uint32_t branching,
                                           std::vector<uint8_t> next, std::vector<double> prob) {
  if (order != 1 && order != 2)
    return InvalidArgument("markov chain: 'order' must be 1 or 2, got " + std::to_string(order));
  MarkovChain chain(order, branching);
  const size_t want = static_cast<size_t>(chain.num_states()) * branching;
  if (branching < 1 || next.size() != want || prob.size() != want)
    return InvalidArgument("markov chain: table needs " + std::to_string(want) +
                           " entries, got next=" + std::to_string(next.size()) +
                           " prob=" + std::to_string(prob.size()));
  for (uint32_t s = 0; s < chain.num_states(); ++s) {
    double sum = 0;
    for (uint32_t j = 0; j < branching; ++j) {
      const double p = prob[static_cast<size_t>(s) * branching + j];
      if (!(p >= 0.0)) return InvalidArgument("markov chain: negative probability at state " + std::to_string(s));
      sum += p;
    }
    if (std::abs(sum - 1.0) > 1e-9)
      return InvalidArgument("markov chain: probabilities of state " + std::to_string(s) +
                             " sum to " + std::to_string(sum) + ", not 1");
  }
  chain.next_ = std::move(next);
  chain.prob_ = std::move(prob);
  return chain;
}

MarkovChain MarkovChain::Perturbed(uint64_t seed, double strength) const {
  MarkovChain out = *this;
  SplitMix rng(MixSeed(seed, 0x70657274ULL));  // "pert"
  for (uint32_t s = 0; s < num_states(); ++s) {
    double* pr = &out.prob_[static_cast<size_t>(s) * branching_];
    double sum = 0;
    for (uint32_t j = 0; j < branching_; ++j) {
      pr[j] *= std::exp(strength * (2.0 * rng.NextDouble() - 1.0));
      sum += pr[j];
    }
    for (uint32_t j = 0; j < branching_; ++j) pr[j] /= sum;
  }
  return out;
}

uint8_t MarkovChain::Sample(uint32_t state, double u) const {
  const size_t base = static_cast<size_t>(state) * branching_;
  double acc = 0;
  for (uint32_t j = 0; j + 1 < branching_; ++j) {
    acc += prob_[base + j];
    if (u < acc) return next_[base + j];
  }
  return next_[base + branching_ - 1];
}

Result<std::vector<double>> MarkovChain::Stationary() const {
  const uint32_t n = num_states();
  std::vector<double> pi(n, 1.0 / n), step(n);
  constexpr int kMaxIterations = 200000;
  for (int it = 0; it < kMaxIterations; ++it) {
    // step = (pi + pi P) / 2: the lazy chain.
    for (uint32_t s = 0; s < n; ++s) step[s] = 0.5 * pi[s];
    for (uint32_t s = 0; s < n; ++s) {
      if (pi[s] == 0.0) continue;
      const double half = 0.5 * pi[s];
      const size_t base = static_cast<size_t>(s) * branching_;
      for (uint32_t j = 0; j < branching_; ++j)
        step[NextState(s, next_[base + j])] += half * prob_[base + j];
    }
    double diff = 0, total = 0;
    for (uint32_t s = 0; s < n; ++s) {
      diff += std::abs(step[s] - pi[s]);
      total += step[s];
    }
    for (uint32_t s = 0; s < n; ++s) pi[s] = step[s] / total;  // guard against drift
    if (diff < 1e-13) return pi;
  }
  return Internal("markov chain: stationary distribution did not converge in " +
                  std::to_string(kMaxIterations) + " power iterations");
}

Result<double> MarkovChain::EntropyRate() const {
  LONGHAUL_ASSIGN_OR_RETURN(std::vector<double> pi, Stationary());
  double h = 0;
  for (uint32_t s = 0; s < num_states(); ++s) {
    if (pi[s] == 0.0) continue;
    double hs = 0;
    for (uint32_t j = 0; j < branching_; ++j) {
      const double p = prob_[static_cast<size_t>(s) * branching_ + j];
      if (p > 0) hs -= p * std::log(p);
    }
    h += pi[s] * hs;
  }
  return h;
}

}  // namespace longhaul::trainer
