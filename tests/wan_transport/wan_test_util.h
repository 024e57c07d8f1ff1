// Helpers for wan_transport tests: key pairs and a pair of bound endpoints.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "longhaul/wan_transport/endpoint.h"

namespace longhaul::wan_transport::testing {

inline CurveKeyPair Keys() {
  auto k = GenerateCurveKeyPair();
  REQUIRE(k.ok());
  return *k;
}

// n endpoints for job "job", all keys on everyone's allowlist.
struct Cluster {
  std::vector<CurveKeyPair> keys;
  std::vector<std::unique_ptr<WanEndpoint>> eps;

  explicit Cluster(int n, WanOptions base = {}) {
    for (int i = 0; i < n; ++i) keys.push_back(Keys());
    std::vector<std::string> pubs;
    for (auto& k : keys) pubs.push_back(k.public_key);
    for (int i = 0; i < n; ++i) {
      WanOptions o = base;
      o.job_id = "job";
      o.keys = keys[i];
      o.allowlist = Allowlist::Of(pubs);
      auto ep = WanEndpoint::Bind("127.0.0.1:0", o);
      REQUIRE(ep.ok());
      eps.push_back(std::move(*ep));
    }
  }
  GroupSpec Spec(int rank, uint32_t round = 1, uint64_t epoch = 1) const {
    GroupSpec s{"job", round, epoch, rank, {}};
    for (size_t i = 0; i < eps.size(); ++i) s.peers.push_back({eps[i]->endpoint(), keys[i].public_key});
    return s;
  }
  PeerSpec Peer(int i) const { return {eps[i]->endpoint(), keys[i].public_key}; }
};

inline std::vector<std::byte> Bytes(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed * 7 + (i >> 9)) & 0xFF);
  return v;
}

}  // namespace longhaul::wan_transport::testing
