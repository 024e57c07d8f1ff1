// WanPort over wan_transport's WanEndpoint: chunked, checksummed transfers over
// several parallel (CURVE) connections per peer, with pacing and link
// measurement. Peers' listener keys come with the round (WanPeer::public_key)
// and are admitted on our listener when we join their group.

#include "longhaul/worker/wan_port.h"
#include "longhaul/wan_transport/endpoint.h"

namespace longhaul::worker {
namespace {

class TransportWanPort final : public WanPort {
 public:
  TransportWanPort(WanPortOptions options, std::unique_ptr<wan_transport::WanEndpoint> endpoint)
      : options_(std::move(options)), endpoint_(std::move(endpoint)) {}

  std::string endpoint() const override { return endpoint_->endpoint(); }

  Result<std::unique_ptr<sync_policies::CollectiveLink>> Join(const std::vector<WanPeer>& peers, int rank,
                                                              uint32_t round, uint64_t epoch, int connections_per_peer,
                                                              Deadline deadline) override {
    wan_transport::GroupSpec spec;
    spec.deadline = deadline;
    spec.job_id = options_.job_id;
    spec.connections_per_peer = connections_per_peer;
    spec.round = round;
    spec.epoch = epoch;
    spec.rank = rank;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (!options_.insecure && static_cast<int>(i) != rank && peers[i].public_key.empty()) {
        return InvalidArgument("region " + peers[i].region +
                               " advertised no WAN public key (is its agent running --insecure?)");
      }
      spec.peers.push_back({peers[i].endpoint, options_.insecure ? "" : peers[i].public_key});
    }
    return endpoint_->Join(spec);
  }

  void CancelThrough(uint64_t epoch) override { endpoint_->CancelThrough(epoch); }

  std::map<std::string, sync_policies::LinkEstimate> measurements() const override {
    return endpoint_->measurements().peers;
  }

 private:
  WanPortOptions options_;
  std::unique_ptr<wan_transport::WanEndpoint> endpoint_;
};

// GCC 12 at -O3 reports a spurious -Wfree-nonheap-object ("unallocated object
// '1'") when a WanOptions is destroyed here; the code is plain value handling.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
Result<wan_transport::WanOptions> MakeWanOptions(const WanPortOptions& options) {
  wan_transport::WanOptions w;
  w.job_id = options.job_id;
  w.encryption = !options.insecure;
  w.timeouts.link_io = options.link_io;
  w.timeouts.collective = options.collective;
  if (!options.insecure) {
    if (options.keys.secret_key.empty()) return InvalidArgument("WAN key: CURVE needs this launch's key pair");
    w.keys = options.keys;
    w.admit_group_peers = true;
  }
  return w;
}
#pragma GCC diagnostic pop

}  // namespace

Result<std::unique_ptr<WanPort>> BindWanPort(const WanPortOptions& options) {
  auto w = MakeWanOptions(options);
  if (!w.ok()) return w.status();
  std::string bind_address = options.host;
  bind_address += ":0";
  auto endpoint = wan_transport::WanEndpoint::Bind(bind_address, std::move(w.value()));
  if (!endpoint.ok()) return endpoint.status().WithContext("binding the WAN endpoint on " + bind_address);
  std::unique_ptr<WanPort> port = std::make_unique<TransportWanPort>(options, std::move(endpoint.value()));
  return port;
}

}  // namespace longhaul::worker
