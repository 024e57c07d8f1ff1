// Ring order: exact branch-and-bound for up to 10 participants, greedy widest
// edge + local search (swap and segment reversal) beyond.
#include "longhaul/sync_policies/ring_order.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace longhaul::sync_policies {
namespace {

constexpr int kExactLimit = 10;

struct Score {
  double bottleneck = -1;
  int at_bottleneck = 0;  // fewer edges at the bottleneck is better (escapes plateaus)
  double total = 0;
  bool BetterThan(const Score& o) const {
    if (bottleneck != o.bottleneck) return bottleneck > o.bottleneck;
    if (at_bottleneck != o.at_bottleneck) return at_bottleneck < o.at_bottleneck;
    return total > o.total;
  }
};

Score Evaluate(const BandwidthMatrix& m, const std::vector<int>& order) {
  Score s;
  s.bottleneck = std::numeric_limits<double>::infinity();
  size_t n = order.size();
  for (size_t k = 0; k < n; ++k) {
    double b = m.bytes_per_second[order[k]][order[(k + 1) % n]];
    s.total += b;
    if (b < s.bottleneck) {
      s.bottleneck = b;
      s.at_bottleneck = 1;
    } else if (b == s.bottleneck) {
      ++s.at_bottleneck;
    }
  }
  return s;
}

struct ExactSearch {
  const BandwidthMatrix& m;
  int n;
  std::vector<int> current, best;
  std::vector<bool> used;
  double best_bottleneck = -1;
  uint64_t leaves = 0;

  // current[0..depth) placed; `bound` = the smallest edge so far.
  void Dfs(int depth, double bound) {
    if (bound <= best_bottleneck) return;  // cannot beat the best: prune
    if (depth == n) {
      ++leaves;
      double closing = std::min(bound, m.bytes_per_second[current[n - 1]][current[0]]);
      if (closing > best_bottleneck) {
        best_bottleneck = closing;
        best = current;
      }
      return;
    }
    for (int v = 1; v < n; ++v) {
      if (used[v]) continue;
      used[v] = true;
      current[depth] = v;
      Dfs(depth + 1, std::min(bound, m.bytes_per_second[current[depth - 1]][v]));
      used[v] = false;
    }
  }
};

std::vector<int> Heuristic(const BandwidthMatrix& m, int* passes_out) {
  int n = m.size();
  std::vector<int> best;
  Score best_score;
  // Greedy: from each start, always take the widest edge to an unvisited node.
  for (int start = 0; start < n; ++start) {
    std::vector<int> order{start};
    std::vector<bool> used(n, false);
    used[start] = true;
    while (static_cast<int>(order.size()) < n) {
      int from = order.back(), pick = -1;
      for (int v = 0; v < n; ++v)
        if (!used[v] && (pick < 0 || m.bytes_per_second[from][v] > m.bytes_per_second[from][pick])) pick = v;
      used[pick] = true;
      order.push_back(pick);
    }
    Score s = Evaluate(m, order);
    if (best.empty() || s.BetterThan(best_score)) {
      best = order;
      best_score = s;
    }
  }
  // Local search: first improving swap or segment reversal, bounded passes.
  int passes = 0;
  for (bool improved = true; improved && passes < 100; ++passes) {
    improved = false;
    for (int i = 0; i < n && !improved; ++i) {
      for (int j = i + 1; j < n && !improved; ++j) {
        for (int move = 0; move < 2 && !improved; ++move) {
          std::vector<int> cand = best;
          if (move == 0)
            std::swap(cand[i], cand[j]);
          else
            std::reverse(cand.begin() + i, cand.begin() + j + 1);
          Score s = Evaluate(m, cand);
          if (s.BetterThan(best_score)) {
            best = std::move(cand);
            best_score = s;
            improved = true;
          }
        }
      }
    }
  }
  *passes_out = passes;
  // Present the ring starting at participant 0, like the exact search.
  std::rotate(best.begin(), std::find(best.begin(), best.end(), 0), best.end());
  return best;
}

Status ValidateMatrix(const BandwidthMatrix& m) {
  int n = m.size();
  if (n == 0) return InvalidArgument("bandwidth matrix is empty");
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(m.bytes_per_second[i].size()) != n)
      return InvalidArgument("bandwidth matrix row " + std::to_string(i) + " has " +
                             std::to_string(m.bytes_per_second[i].size()) + " entries, expected " + std::to_string(n));
    for (int j = 0; j < n; ++j) {
      double b = m.bytes_per_second[i][j];
      if (!std::isfinite(b) || b < 0)
        return InvalidArgument("bandwidth matrix entry [" + std::to_string(i) + "][" + std::to_string(j) +
                               "] must be finite and >= 0, got " + std::to_string(b));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<RingOrder> ChooseRingOrder(const BandwidthMatrix& matrix) {
  LONGHAUL_RETURN_IF_ERROR(ValidateMatrix(matrix));
  int n = matrix.size();
  RingOrder ring;
  if (n == 1) {
    ring.order = {0};
    ring.reason = "single participant; no links";
    return ring;
  }
  std::string method;
  if (n <= kExactLimit) {
    ExactSearch search{matrix, n, std::vector<int>(n), {}, std::vector<bool>(n, false)};
    search.current[0] = 0;
    search.used[0] = true;
    search.Dfs(1, std::numeric_limits<double>::infinity());
    if (search.best.empty()) {  // every ring has bottleneck 0: keep the identity
      search.best.resize(n);
      std::iota(search.best.begin(), search.best.end(), 0);
    }
    ring.order = search.best;
    uint64_t rings = 1;
    for (int k = 2; k < n; ++k) rings *= static_cast<uint64_t>(k);
    method = "exact search over " + std::to_string(rings) + " rings";
  } else {
    int passes = 0;
    ring.order = Heuristic(matrix, &passes);
    method = "heuristic (greedy widest edge + " + std::to_string(passes) + " local-search passes) over " +
             std::to_string(n) + " participants";
  }
  // Name the bottleneck link.
  int from = 0, to = 0;
  double bottleneck = std::numeric_limits<double>::infinity();
  for (int k = 0; k < n; ++k) {
    int a = ring.order[k], b = ring.order[(k + 1) % n];
    if (matrix.bytes_per_second[a][b] < bottleneck) {
      bottleneck = matrix.bytes_per_second[a][b];
      from = a;
      to = b;
    }
  }
  ring.bottleneck_bytes_per_second = bottleneck;
  char buf[128];
  std::snprintf(buf, sizeof buf, "; bottleneck %d->%d %.4g MB/s%s", from, to, bottleneck / 1e6,
                bottleneck == 0 ? " (unmeasured or unreachable link)" : "");
  ring.reason = method + buf;
  return ring;
}

}  // namespace longhaul::sync_policies
