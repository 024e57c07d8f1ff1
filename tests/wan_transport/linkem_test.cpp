// Integration: longhaul-linkem as a real process. Its rate and delay must be
// within 10% of the settings, also after its control file changed them; bad
// flags exit 2.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "wan_transport/wan_test_util.h"

using namespace longhaul::wan_transport::testing;
using namespace std::chrono_literals;

namespace {

const std::string kLinkem = std::string(LONGHAUL_BIN_DIR) + "/longhaul-linkem";

bool ReadN(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool WriteN(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// One-connection server: 'p' -> echo 'p'; 'b' + u64 n + n bytes -> 'd'.
struct Server {
  int lfd = -1, port = 0;
  std::thread th;
  Server() {
    lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(lfd, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    th = std::thread([this] {
      int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::vector<char> buf(1 << 16);
      char op;
      while (ReadN(fd, &op, 1)) {
        if (op == 'p') {
          if (!WriteN(fd, "p", 1)) break;
        } else if (op == 'b') {
          uint64_t n;
          if (!ReadN(fd, reinterpret_cast<char*>(&n), 8)) break;
          while (n > 0) {
            size_t k = std::min<uint64_t>(n, buf.size());
            if (!ReadN(fd, buf.data(), k)) break;
            n -= k;
          }
          if (!WriteN(fd, "d", 1)) break;
        }
      }
      ::close(fd);
    });
  }
  ~Server() {
    ::shutdown(lfd, SHUT_RDWR);
    ::close(lfd);
    th.join();
  }
};

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// longhaul-linkem with its stdout captured; killed and reaped at the end of its scope.
longhaul::testing::Subprocess StartLinkem(const std::vector<std::string>& argv) {
  auto p = longhaul::testing::Subprocess::Spawn(argv, {.capture_stdout = true});
  REQUIRE(p.ok());
  return std::move(*p);
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The median of `pings` one-byte round trips through the server's echo.
double MedianRtt(int fd, int pings) {
  std::vector<double> rtts;
  for (int i = 0; i < pings; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    char c = 'p';
    REQUIRE(WriteN(fd, &c, 1));
    REQUIRE(ReadN(fd, &c, 1));
    rtts.push_back(Seconds(std::chrono::steady_clock::now() - t0));
  }
  std::sort(rtts.begin(), rtts.end());
  return rtts[rtts.size() / 2];
}

// Seconds from sending n bytes to the server's receipt of the last of them
// coming back (one RTT more than the transfer itself).
double BulkSeconds(int fd, uint64_t n) {
  std::vector<char> payload(1 << 20, 'x');
  auto t0 = std::chrono::steady_clock::now();
  char op = 'b';
  REQUIRE(WriteN(fd, &op, 1));
  REQUIRE(WriteN(fd, reinterpret_cast<const char*>(&n), 8));
  for (uint64_t sent = 0; sent < n; sent += payload.size()) REQUIRE(WriteN(fd, payload.data(), payload.size()));
  char done;
  REQUIRE(ReadN(fd, &done, 1));
  return Seconds(std::chrono::steady_clock::now() - t0);
}

}  // namespace

TEST_CASE("linkem's measured throughput and RTT are within 10% of its settings") {
  const double rate_mbit = 40, delay_ms = 15;
  Server server;
  auto linkem = StartLinkem({kLinkem, "--listen", "127.0.0.1:0", "--forward", "127.0.0.1:" + std::to_string(server.port),
                             "--rate-mbit", "40", "--delay-ms", "15", "--quiet"});
  std::string line = linkem.ReadLine(10s);
  REQUIRE(line.rfind("listening on 127.0.0.1:", 0) == 0);
  int fd = Connect(std::stoi(line.substr(line.rfind(':') + 1)));

  const double rtt = MedianRtt(fd, 9);
  CHECK(rtt == Approx(2 * delay_ms / 1000).epsilon(0.10));

  const uint64_t n = 8 << 20;  // ~1.7 s at 40 Mbit/s
  const double elapsed = BulkSeconds(fd, n);
  double throughput_bits = static_cast<double>(n) * 8 / (elapsed - rtt);
  CAPTURE(elapsed, rtt);
  CHECK(throughput_bits == Approx(rate_mbit * 1e6).epsilon(0.10));
  ::close(fd);

  linkem.Signal(SIGTERM);
  CHECK(linkem.Wait(5s) == 0);
}

TEST_CASE("linkem rejects bad flags with exit code 2") {
  auto no_forward = StartLinkem({kLinkem, "--listen", "127.0.0.1:0"});
  CHECK(no_forward.Wait(5s) == 2);
  auto bad_rate = StartLinkem({kLinkem, "--forward", "127.0.0.1:1", "--rate-mbit", "-5"});
  CHECK(bad_rate.Wait(5s) == 2);
  auto bad_host = StartLinkem({kLinkem, "--forward", "nowhere:80"});
  CHECK(bad_host.Wait(5s) == 2);
}

TEST_CASE("linkem reshapes a running link from its control file and keeps its shape when the file is bad") {
  longhaul::testing::TempDir dir("linkem");  // before the process that writes into it
  const std::string control = (dir / "link.control").string();
  Server server;
  auto p = longhaul::testing::Subprocess::Spawn(
      {kLinkem, "--listen", "127.0.0.1:0", "--forward", "127.0.0.1:" + std::to_string(server.port), "--rate-mbit", "40",
       "--delay-ms", "10", "--control-file", control},
      {.log_path = (dir / "linkem.log").string(), .capture_stdout = true});
  REQUIRE(p.ok());
  auto& linkem = *p;
  std::string line = linkem.ReadLine(10s);
  REQUIRE(line.rfind("listening on 127.0.0.1:", 0) == 0);
  int fd = Connect(std::stoi(line.substr(line.rfind(':') + 1)));
  CHECK(MedianRtt(fd, 5) == Approx(0.020).epsilon(0.10));

  auto write = [&](const std::string& text) {
    std::ofstream out(control, std::ios::trunc);
    out << text;
  };
  write("rate-mbit=10 delay-ms=40  # the link gets worse\n");
  REQUIRE(linkem.WaitForLine("now rate-mbit=10 delay-ms=40 jitter-ms=0", 5s));
  CHECK(MedianRtt(fd, 5) == Approx(0.080).epsilon(0.10));
  const uint64_t n = 2 << 20;  // ~1.7 s at 10 Mbit/s
  const double elapsed = BulkSeconds(fd, n);
  CAPTURE(elapsed);
  CHECK(static_cast<double>(n) * 8 / (elapsed - 0.080) == Approx(10e6).epsilon(0.10));

  write("rate-mbit=fast\n");
  REQUIRE(linkem.WaitForLine("rate-mbit: 'fast' is not a number", 5s));
  CHECK(MedianRtt(fd, 5) == Approx(0.080).epsilon(0.10));  // kept
  ::close(fd);
  linkem.Signal(SIGTERM);
  CHECK(linkem.Wait(5s) == 0);
}
