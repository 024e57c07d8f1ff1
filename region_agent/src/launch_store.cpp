#include "longhaul/region_agent/launch_store.h"

#include "longhaul/common/printable_text.h"
#include "longhaul/proto/frame.h"

namespace longhaul::region_agent {

Status LaunchStore::Set(const std::string& key, std::string value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return InvalidArgument("rendezvous key of " + std::to_string(key.size()) + " bytes (1 to " +
                           std::to_string(kMaxKeyBytes) + " allowed)");
  }
  const std::string name = "rendezvous key '" + PrintableTail(key, 80) + "'";
  if (value.size() > kMaxValueBytes) {
    return InvalidArgument(name + ": a value of " + std::to_string(value.size()) + " bytes (at most " +
                           std::to_string(kMaxValueBytes) + ")");
  }
  const auto it = entries_.find(key);
  const size_t replaced = it == entries_.end() ? 0 : key.size() + it->second.size();
  const size_t total = bytes_ - replaced + key.size() + value.size();
  if (total > kMaxTotalBytes) {
    return ResourceExhausted(name + ": the launch's store would hold " + std::to_string(total) + " bytes (at most " +
                             std::to_string(kMaxTotalBytes) + ")");
  }
  entries_[key] = std::move(value);
  bytes_ = total;
  return Status::Ok();
}

std::optional<std::string> LaunchStore::Get(const std::string& key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

v1::StoreReply LaunchStore::Serve(const v1::StoreRequest& request) {
  v1::StoreReply reply;
  switch (request.op()) {
    case v1::StoreRequest::SET: {
      const Status s = Set(request.key(), request.value());
      if (!s.ok()) {
        *reply.mutable_error() = proto::ToWireError(s);
      } else {
        reply.set_found(true);
      }
      break;
    }
    case v1::StoreRequest::GET:
      if (auto v = Get(request.key())) {
        reply.set_found(true);
        reply.set_value(std::move(*v));
      }
      break;
    default:
      *reply.mutable_error() =
          proto::ToWireError(InvalidArgument("store request with op " + std::to_string(request.op()) + " (SET or GET)"));
  }
  return reply;
}

}  // namespace longhaul::region_agent
