// Integration: real sender processes on 127.0.0.1 against an in-test receiver.
#include <filesystem>

#include "longhaul/common/checksum.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "wan_transport/wan_test_util.h"

using namespace longhaul;
using namespace longhaul::wan_transport;
using namespace longhaul::wan_transport::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kSender = std::string(LONGHAUL_BIN_DIR) + "/wan_test_sender";

// A sender process, killed and reaped at the end of its scope.
longhaul::testing::Subprocess StartSender(const std::vector<std::string>& argv) {
  auto p = longhaul::testing::Subprocess::Spawn(argv, {.capture_stdout = true});
  REQUIRE(p.ok());
  return std::move(*p);
}

struct Fixture {
  longhaul::testing::TempDir tmp{"wan-itest"};
  fs::path dir = tmp.path();
  CurveKeyPair receiver_keys = Keys(), sender_keys = Keys();
  std::unique_ptr<WanEndpoint> ep;
  std::unique_ptr<sync_policies::CollectiveLink> link;

  explicit Fixture(Duration link_io = 10s) {
    REQUIRE(WriteKeyPair(dir, "sender", sender_keys).ok());
    REQUIRE(WriteKeyPair(dir, "intruder", Keys()).ok());
    WanOptions o;
    o.job_id = "itest";
    o.keys = receiver_keys;
    o.allowlist = Allowlist::Of({sender_keys.public_key});
    o.timeouts.link_io = link_io;
    auto e = WanEndpoint::Bind("127.0.0.1:0", o);
    REQUIRE(e.ok());
    ep = std::move(*e);
    Join(0);
  }
  void Join(int seed) {
    link.reset();
    GroupSpec spec{"itest", static_cast<uint32_t>(seed + 1), 1, 0, {{ep->endpoint(), receiver_keys.public_key}, {"tcp://127.0.0.1:1", sender_keys.public_key}}};
    auto l = ep->Join(spec);
    REQUIRE(l.ok());
    link = std::move(*l);
  }
  std::vector<std::string> Args(const std::string& key, size_t size, int seed, double pacing = 0) {
    return {kSender, (dir / (key + ".key")).string(), ep->endpoint(), receiver_keys.public_key,
            std::to_string(size), std::to_string(seed), std::to_string(pacing)};
  }
};

}  // namespace

TEST_CASE("transfers between processes arrive intact from 1 byte to 256 MiB") {
  Fixture f;
  const std::vector<size_t> sizes = {1, 1000, (1 << 20) + 1, size_t{64} << 20, size_t{256} << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(sizes[i]);
    f.Join(static_cast<int>(i));
    auto sender = StartSender(f.Args("sender", sizes[i], static_cast<int>(i)));
    auto got = f.link->Recv(1, 0, DeadlineAfter(60s));
    REQUIRE(got.ok());
    REQUIRE(got->size() == sizes[i]);
    std::string line;
    for (int n = 0; n < 3 && line.rfind("sent", 0) != 0; ++n) line = sender.ReadLine(30s);
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Checksum64(got->data(), got->size())));
    CHECK(line == "sent " + std::to_string(sizes[i]) + " " + hash);
    CHECK(sender.Wait(30s) == 0);
  }
}

TEST_CASE("a sender whose key is not allowlisted delivers nothing and is counted") {
  Fixture f;
  auto intruder = StartSender(f.Args("intruder", 1000, 0));
  auto got = f.link->Recv(1, 0, DeadlineAfter(2s));
  CHECK(got.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(f.ep->rejected_connections() >= 1);
}

TEST_CASE("a sender killed mid-transfer makes Recv fail within link_io, with no partial result") {
  Fixture f(1s);
  f.Join(3);
  auto sender = StartSender(f.Args("sender", size_t{64} << 20, 3, 16e6));  // paced: ~4 s for the whole message
  REQUIRE(sender.ReadLine(10s) == "started");
  // Wait until the transfer is under way: a Recv that times out leaves it in
  // place and reports what has arrived.
  std::string progress;
  for (int i = 0; i < 100 && progress.find("bytes received") == std::string::npos; ++i) {
    auto early = f.link->Recv(1, 0, DeadlineAfter(100ms));
    REQUIRE_FALSE(early.ok());  // paced: the whole message takes seconds
    progress = early.status().message();
  }
  INFO(progress);
  REQUIRE(progress.find("bytes received") != std::string::npos);
  sender.Kill();
  // Unavailable "mid-transfer" (not DeadlineExceeded): the link_io watchdog
  // ended the wait, not the 30 s deadline; nothing partial is returned.
  auto got = f.link->Recv(1, 0, DeadlineAfter(30s));
  CHECK(got.status().code() == StatusCode::kUnavailable);
  CHECK(got.status().message().find("mid-transfer") != std::string::npos);
}
