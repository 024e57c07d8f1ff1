// LONGHAUL_WAN_HOST=auto: the address of this host on the route to the agent;
// what a Slurm task needs for torch.distributed (port, interface, master text).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "longhaul/session/local_address.h"
#include "longhaul/session/torch_rendezvous.h"

namespace ls = longhaul::session;

TEST_CASE("session: auto host is this host's address on the route to the agent", "[session]") {
  // Every 127/8 address is on lo, whose own address is 127.0.0.1.
  auto own = ls::LocalAddressToward("tcp://127.0.0.2:5555");
  REQUIRE(own.ok());
  CHECK(*own == "127.0.0.1");
  own = ls::LocalAddressToward("tcp://localhost:1");
  REQUIRE(own.ok());
  CHECK(*own == "127.0.0.1");
}

TEST_CASE("session: auto host refuses an endpoint it cannot read or resolve, naming it", "[session]") {
  CHECK(ls::LocalAddressToward("127.0.0.1:5").status().message() == "'127.0.0.1:5' is not tcp://HOST:PORT");
  CHECK(ls::LocalAddressToward("tcp://:5").status().message() == "'tcp://:5' is not tcp://HOST:PORT");
  const auto bad = ls::LocalAddressToward("tcp://no-such-host.invalid:5");
  CHECK(bad.status().code() == longhaul::StatusCode::kUnavailable);
  CHECK_THAT(bad.status().message(), Catch::StartsWith("cannot resolve no-such-host.invalid (of tcp://no-such-host.invalid:5)"));
}

TEST_CASE("session: a worker's host is the agent's data host, or its own on the route with auto", "[session]") {
  auto fixed = ls::WorkerHost("10.1.2.3", "tcp://127.0.0.2:5555");
  REQUIRE(fixed.ok());
  CHECK(*fixed == "10.1.2.3");
  auto own = ls::WorkerHost(ls::kAutoHost, "tcp://127.0.0.2:5555");
  REQUIRE(own.ok());
  CHECK(*own == "127.0.0.1");
  CHECK_THAT(ls::WorkerHost(ls::kAutoHost, "bad").status().message(), Catch::StartsWith("LONGHAUL_WAN_HOST=auto"));
}

TEST_CASE("session: the interface of an address, for torch's GLOO_SOCKET_IFNAME", "[session]") {
  auto lo = ls::InterfaceWithAddress("127.0.0.1");
  REQUIRE(lo.ok());
  CHECK(*lo == "lo");
  CHECK(ls::InterfaceWithAddress("192.0.2.77").status().code() == longhaul::StatusCode::kNotFound);
  CHECK(ls::InterfaceWithAddress("lo").status().code() == longhaul::StatusCode::kInvalidArgument);
}

TEST_CASE("session: a free port is one a listener can bind on every address at once", "[session]") {
  auto port = ls::FreeTcpPort();
  REQUIRE(port.ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  ::close(fd);
}

TEST_CASE("session: torch's master travels as ADDR:PORT, and a bad one is named", "[session]") {
  ls::TorchRendezvous r;
  REQUIRE(ls::MasterFromText("10.231.4.2:29500", &r).ok());
  CHECK(r.master_addr == "10.231.4.2");
  CHECK(r.master_port == 29500);
  CHECK(ls::MasterToText(r) == "10.231.4.2:29500");
  for (const char* bad : {"10.0.0.1", ":5", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:70000", "10.0.0.1:5x"}) {
    INFO(bad);
    CHECK_THAT(ls::MasterFromText(bad, &r).message(), Catch::Contains("is not ADDR:PORT"));
  }
}
