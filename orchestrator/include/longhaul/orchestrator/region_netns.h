// RegionNetworks: each region of a local cluster on a host of its own (also
// the nodes of a test's Slurm cluster: regions without a rate). Every
// region gets a network namespace with its own address; a bridge in the
// caller's namespace joins them to each other and to the orchestrator (which
// listens on the bridge's address), and each region's veth pair is shaped with
// tc tbf to the region's rate in both directions (its uplink and downlink), so
// no component can rely on loopback or on a port space shared with another
// region. Delay stays longhaul-linkem's (tbf has none; netem is not available).
// Names carry a per-run tag (the namespaces longhaul-<tag>-<i>, the bridge
// lhbr<tag>); everything is deleted when the object is destroyed. Needs root
// and iproute2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/orchestrator/local_cluster.h"

namespace longhaul::orchestrator {

class RegionNetworks {
 public:
  static Result<std::unique_ptr<RegionNetworks>> Create(const std::vector<LocalRegion>& regions);
  ~RegionNetworks();
  RegionNetworks(const RegionNetworks&) = delete;
  RegionNetworks& operator=(const RegionNetworks&) = delete;

  // The bridge's address in the caller's namespace: where the orchestrator listens.
  const std::string& host_address() const { return host_address_; }
  // Region i's own address, inside its namespace.
  const std::string& address(size_t region) const { return addresses_.at(region); }
  const std::string& netns(size_t region) const { return namespaces_.at(region); }
  // argv run inside region i's namespace.
  std::vector<std::string> Inside(size_t region, const std::vector<std::string>& argv) const;
  // Cuts region i off the bridge (its veth's bridge end down: nothing in or
  // out, and no reset is sent, as when a datacenter's uplink fails) or joins
  // it again.
  Status SetConnected(size_t region, bool connected) const;

 private:
  RegionNetworks() = default;
  std::string bridge_;
  std::vector<std::string> host_sides_;  // each region's veth end on the bridge
  std::string host_address_;
  std::vector<std::string> namespaces_;
  std::vector<std::string> addresses_;
};

}  // namespace longhaul::orchestrator
