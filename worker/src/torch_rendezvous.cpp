#include "longhaul/session/torch_rendezvous.h"

#include <charconv>

#include "agent_store.h"
#include "longhaul/session/local_address.h"

namespace longhaul::session {

std::string MasterToText(const TorchRendezvous& r) { return r.master_addr + ":" + std::to_string(r.master_port); }

Status MasterFromText(const std::string& text, TorchRendezvous* r) {
  const auto colon = text.rfind(':');
  int port = 0;
  const char* end = text.data() + text.size();
  if (colon == std::string::npos || colon == 0 ||
      std::from_chars(text.data() + colon + 1, end, port).ptr != end || port < 1 || port > 65535) {
    return InvalidArgument("torch master '" + text.substr(0, 64) + "' is not ADDR:PORT");
  }
  r->master_addr = text.substr(0, colon);
  r->master_port = port;
  return Status::Ok();
}

Result<TorchRendezvous> AgreeTorchRendezvous(const SessionOptions& options) {
  TorchRendezvous out;
  LONGHAUL_ASSIGN_OR_RETURN(const std::string own, WorkerHost(options.wan_host, options.agent_endpoint));
  // A data host given as a name (or an interface) has no address to look up:
  // torch's gloo then picks its interface as it would without us.
  if (auto interface = InterfaceWithAddress(own); interface.ok()) out.gloo_interface = *interface;
  auto store = AgentStore::ForWorker(options, StoreRequestTimeout(options));
  if (!store.ok()) return store.status().WithContext("torch.distributed rendezvous");
  if (options.rank == 0) {
    auto port = FreeTcpPort();
    if (!port.ok()) return port.status().WithContext("torch.distributed rendezvous (MASTER_PORT)");
    out.master_addr = own;
    out.master_port = *port;
    const std::string text = MasterToText(out);
    LONGHAUL_RETURN_IF_ERROR((*store)->Set(kTorchMasterStoreKey, std::vector<char>(text.begin(), text.end()))
                                 .WithContext("torch.distributed rendezvous"));
    return out;
  }
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(options.collective_timeout);
  auto value = (*store)->Get(kTorchMasterStoreKey, wait);
  if (!value.ok()) return value.status().WithContext("torch.distributed rendezvous: rank 0's MASTER_ADDR");
  LONGHAUL_RETURN_IF_ERROR(MasterFromText(std::string(value->begin(), value->end()), &out));
  return out;
}

}  // namespace longhaul::session
