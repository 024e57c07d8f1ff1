#include "longhaul/session/local_address.h"

#include <arpa/inet.h>
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

}  // namespace longhaul::session
