// WanEndpoint's public face: it forwards to its Impl, and Join checks the spec
// before building the group link over the Impl's GroupTransport.
#include "endpoint_impl.h"

namespace longhaul::wan_transport {

WanEndpoint::WanEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WanEndpoint::~WanEndpoint() = default;

Result<std::unique_ptr<WanEndpoint>> WanEndpoint::Bind(const std::string& bind_address, WanOptions options) {
  KeepMessageMemoryMapped();
  auto impl = std::make_unique<Impl>(std::move(options));
  LONGHAUL_RETURN_IF_ERROR(impl->Start(bind_address));
  return std::unique_ptr<WanEndpoint>(new WanEndpoint(std::move(impl)));
}

std::string WanEndpoint::endpoint() const { return impl_->endpoint(); }
const std::string& WanEndpoint::public_key() const { return impl_->options().keys.public_key; }
LinkMatrix WanEndpoint::measurements() const { return impl_->measurements(); }
uint64_t WanEndpoint::rejected_connections() const { return impl_->rejected_connections(); }
uint64_t WanEndpoint::dropped_frames() const { return impl_->dropped_frames(); }
void WanEndpoint::CancelThrough(uint64_t epoch) { impl_->CancelThrough(epoch); }
Status WanEndpoint::Flush(Deadline deadline) { return impl_->Flush(deadline); }
Result<LinkEstimate> WanEndpoint::Probe(const PeerSpec& peer, size_t probe_bytes, Deadline deadline) {
  return impl_->Probe(peer, probe_bytes, deadline);
}

Result<std::unique_ptr<sync_policies::CollectiveLink>> WanEndpoint::Join(const GroupSpec& spec) {
  const WanOptions& opt = impl_->options();
  if (spec.peers.empty()) return InvalidArgument("GroupSpec.peers is empty");
  if (spec.rank < 0 || spec.rank >= static_cast<int>(spec.peers.size())) {
    return InvalidArgument("GroupSpec.rank " + std::to_string(spec.rank) + " outside [0, " + std::to_string(spec.peers.size()) + ")");
  }
  if (std::chrono::steady_clock::now() >= spec.deadline)
    return DeadlineExceeded("joining round " + std::to_string(spec.round) + ": its deadline has passed");
  if (spec.job_id != opt.job_id) {
    return InvalidArgument("GroupSpec.job_id '" + spec.job_id + "' differs from the endpoint's job '" + opt.job_id + "'");
  }
  for (size_t i = 0; i < spec.peers.size(); ++i) {
    if (static_cast<int>(i) == spec.rank) continue;
    if (spec.peers[i].endpoint.rfind("tcp://", 0) != 0) {
      return InvalidArgument("GroupSpec.peers[" + std::to_string(i) + "].endpoint '" + spec.peers[i].endpoint + "' is not tcp://host:port");
    }
    if (opt.encryption) {
      LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(spec.peers[i].public_key, "GroupSpec.peers[" + std::to_string(i) + "].public_key"));
    }
  }
  LONGHAUL_RETURN_IF_ERROR(impl_->PrepareJoin(spec));
  return MakeGroupLink(*impl_, spec);
}

}  // namespace longhaul::wan_transport
