#include "longhaul/session/local_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace longhaul::session {

Result<std::string> LocalAddressToward(const std::string& endpoint) {
  const std::string scheme = "tcp://";
  const auto colon = endpoint.rfind(':');
  if (endpoint.rfind(scheme, 0) != 0 || colon == std::string::npos || colon <= scheme.size()) {
    return InvalidArgument("'" + endpoint + "' is not tcp://HOST:PORT");
  }
  const std::string host = endpoint.substr(scheme.size(), colon - scheme.size());
  const std::string port = endpoint.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Unavailable("cannot resolve " + host + " (of " + endpoint + "): " + ::gai_strerror(rc));
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string why;
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (fd < 0) {
    why = std::strerror(errno);
  } else if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0 ||
             ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    why = std::strerror(errno);
  }
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!why.empty()) return Unavailable("no route from this host to " + endpoint + ": " + why);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

Result<std::string> WorkerHost(const std::string& wan_host, const std::string& agent_endpoint) {
  if (wan_host != kAutoHost) return wan_host;
  auto own = LocalAddressToward(agent_endpoint);
  if (!own.ok()) return own.status().WithContext("LONGHAUL_WAN_HOST=auto");
  return own;
}

Result<int> FreeTcpPort() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("socket: " + std::string(std::strerror(errno)));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Unavailable("no free TCP port on this host: " + why);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<std::string> InterfaceWithAddress(const std::string& address) {
  in_addr want{};
  if (::inet_pton(AF_INET, address.c_str(), &want) != 1) {
    return InvalidArgument("'" + address + "' is not an IPv4 address (for its interface)");
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Unavailable("getifaddrs: " + std::string(std::strerror(errno)));
  std::string name;
  for (const ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == want.s_addr) name = i->ifa_name;
  }
  ::freeifaddrs(list);
  if (name.empty()) return NotFound("no network interface of this host has address " + address);
  return name;
}

}  // namespace longhaul::session
