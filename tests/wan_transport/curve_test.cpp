// CURVE keys, key files, allowlists and the ZAP handler.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "longhaul/wan_transport/curve.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace longhaul;
using namespace longhaul::wan_transport;

namespace {

using longhaul::testing::TempDir;

// Test key files are written owner-only, like real ones (looser modes are refused).
void WriteText(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
}

CurveKeyPair NewKeys() {
  auto k = GenerateCurveKeyPair();
  REQUIRE(k.ok());
  return *k;
}

}  // namespace

TEST_CASE("generated CURVE keys are 40-char Z85 and round-trip through key files") {
  TempDir dir("curve");
  CurveKeyPair keys = NewKeys();
  CHECK(keys.public_key.size() == 40);
  CHECK(keys.secret_key.size() == 40);
  CHECK(keys.public_key != keys.secret_key);
  REQUIRE(WriteKeyPair(dir.path(), "eu-west", keys).ok());

  struct stat st {};
  REQUIRE(::stat((dir.path() / "eu-west.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto loaded = LoadKeyPair(dir.path() / "eu-west.key");
  REQUIRE(loaded.ok());
  CHECK(loaded->public_key == keys.public_key);
  CHECK(loaded->secret_key == keys.secret_key);
  auto pub = LoadPublicKey(dir.path() / "eu-west.pub");
  REQUIRE(pub.ok());
  CHECK(*pub == keys.public_key);

  Status again = WriteKeyPair(dir.path(), "eu-west", NewKeys());
  CHECK(again.code() == StatusCode::kAlreadyExists);
  CHECK(LoadKeyPair(dir.path() / "eu-west.key")->secret_key == keys.secret_key);  // untouched
}

TEST_CASE("bad key files give errors naming the file and the problem") {
  TempDir dir("curve");
  auto missing = LoadKeyPair(dir.path() / "nope.key");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("nope.key") != std::string::npos);

  WriteText(dir.path() / "short.pub", "abc\n");
  auto short_key = LoadPublicKey(dir.path() / "short.pub");
  CHECK(short_key.status().code() == StatusCode::kInvalidArgument);
  CHECK(short_key.status().message().find("bad length") != std::string::npos);

  WriteText(dir.path() / "bad.pub", std::string(39, 'a') + "~\n");
  auto bad = LoadPublicKey(dir.path() / "bad.pub");
  CHECK(bad.status().message().find("not Z85") != std::string::npos);

  CurveKeyPair a = NewKeys(), b = NewKeys();
  WriteText(dir.path() / "mixed.key", "public-key = " + a.public_key + "\nsecret-key = " + b.secret_key + "\n");
  auto mixed = LoadKeyPair(dir.path() / "mixed.key");
  CHECK(mixed.status().message().find("does not belong") != std::string::npos);
}

TEST_CASE("allowlists load from a key-per-line file or a directory of .pub files") {
  TempDir dir("curve");
  CurveKeyPair a = NewKeys(), b = NewKeys();
  WriteText(dir.path() / "list.txt", "# regions\n" + a.public_key + "\n\n" + b.public_key + "  # us-east\n");
  auto file_list = Allowlist::Load(dir.path() / "list.txt");
  REQUIRE(file_list.ok());
  CHECK(file_list->size() == 2);
  CHECK(file_list->Contains(a.public_key));
  CHECK(file_list->Contains(b.public_key));
  CHECK_FALSE(file_list->Contains(NewKeys().public_key));

  fs::create_directories(dir.path() / "pubs");
  REQUIRE(WriteKeyPair(dir.path() / "pubs", "a", a).ok());
  auto dir_list = Allowlist::Load(dir.path() / "pubs");
  REQUIRE(dir_list.ok());
  CHECK(dir_list->size() == 1);
  CHECK(dir_list->Contains(a.public_key));

  WriteText(dir.path() / "broken.txt", a.public_key + "\nnot-a-key\n");
  auto broken = Allowlist::Load(dir.path() / "broken.txt");
  CHECK_FALSE(broken.ok());
  CHECK(broken.status().message().find("line 2") != std::string::npos);
}

TEST_CASE("a CURVE ROUTER with an allowlist admits allowlisted clients only") {
  zmq::context_t ctx;
  CurveKeyPair server = NewKeys(), good = NewKeys(), wrong = NewKeys();
  auto zap = ZapAuthenticator::Start(ctx, Allowlist::Of({good.public_key}));
  REQUIRE(zap.ok());

  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  MakeCurveServer(router, server);
  router.bind("tcp://127.0.0.1:0");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);

  auto make_client = [&](const CurveKeyPair& own) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 1000);
    MakeCurveClient(s, own, server.public_key);
    s.connect(endpoint);
    return s;
  };
  zmq::socket_t good_client = make_client(good);
  zmq::socket_t wrong_client = make_client(wrong);
  good_client.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  wrong_client.send(zmq::str_buffer("intruder"), zmq::send_flags::none);

  // The router echoes whatever arrives; only the good client's message can.
  router.set(zmq::sockopt::rcvtimeo, 2000);
  std::vector<zmq::message_t> msg;
  zmq::message_t id, body;
  REQUIRE(router.recv(id));
  REQUIRE(router.recv(body));
  CHECK(body.to_string() == "hello");
  router.send(id, zmq::send_flags::sndmore);
  router.send(zmq::str_buffer("welcome"), zmq::send_flags::none);
  zmq::message_t reply;
  REQUIRE(good_client.recv(reply));
  CHECK(reply.to_string() == "welcome");

  // Nothing from the wrong key ever reaches the router.
  router.set(zmq::sockopt::rcvtimeo, 500);
  zmq::message_t extra;
  CHECK_FALSE(router.recv(extra));
  zmq::message_t nothing;
  CHECK_FALSE(wrong_client.recv(nothing));  // times out
  CHECK((*zap)->rejected() >= 1);
  CHECK((*zap)->accepted() >= 1);
}

TEST_CASE("keys containing '#' survive key files and allowlists") {
  // '#' is a Z85 character: about half of random key pairs contain one.
  int with_hash = 0;
  for (int i = 0; i < 200 && with_hash < 20; ++i) {
    CurveKeyPair keys = NewKeys();
    if (keys.public_key.find('#') == std::string::npos && keys.secret_key.find('#') == std::string::npos) continue;
    ++with_hash;
    TempDir dir("curve");
    REQUIRE(WriteKeyPair(dir.path(), "r", keys).ok());
    auto loaded = LoadKeyPair(dir.path() / "r.key");
    REQUIRE(loaded.ok());
    CHECK(loaded->secret_key == keys.secret_key);
    auto list = Allowlist::Load(dir.path() / "r.pub");
    REQUIRE(list.ok());
    CHECK(list->Contains(keys.public_key));
  }
  REQUIRE(with_hash == 20);
  // Z85 never starts a 32-byte key with '#' (the first digit of a 32-bit group
  // is at most 82, '#' is digit 84), so "name = key  # comment" stays unambiguous.
}

TEST_CASE("a secret key file readable by group or others is refused with the fix") {
  TempDir dir("curve");
  REQUIRE(WriteKeyPair(dir.path(), "eu-west", NewKeys()).ok());
  const auto key = dir.path() / "eu-west.key";
  REQUIRE(::chmod(key.c_str(), 0644) == 0);
  auto loaded = LoadKeyPair(key);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().message().find("mode 0644") != std::string::npos);
  CHECK(loaded.status().message().find("chmod 600") != std::string::npos);
  REQUIRE(::chmod(key.c_str(), 0600) == 0);
  CHECK(LoadKeyPair(key).ok());
}

TEST_CASE("a ZAP handler with an admit wait holds an unknown client until its key is admitted, then refuses late ones") {
  zmq::context_t ctx;
  CurveKeyPair server = NewKeys(), early = NewKeys(), never = NewKeys();
  auto zap = ZapAuthenticator::Start(ctx, Allowlist(), std::chrono::milliseconds(1500));
  REQUIRE(zap.ok());
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  MakeCurveServer(router, server);
  router.bind("tcp://127.0.0.1:0");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  auto make_client = [&](const CurveKeyPair& own) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    MakeCurveClient(s, own, server.public_key);
    s.connect(endpoint);
    return s;
  };
  zmq::socket_t early_client = make_client(early);
  zmq::socket_t never_client = make_client(never);
  early_client.send(zmq::str_buffer("early"), zmq::send_flags::none);
  never_client.send(zmq::str_buffer("never"), zmq::send_flags::none);

  // Neither key is admitted yet: nothing gets through.
  router.set(zmq::sockopt::rcvtimeo, 300);
  zmq::message_t id, body;
  CHECK_FALSE(router.recv(id));
  // Admitting the early key lets its held handshake finish: its message arrives.
  (*zap)->Admit({early.public_key});
  router.set(zmq::sockopt::rcvtimeo, 5000);
  REQUIRE(router.recv(id));
  REQUIRE(router.recv(body));
  CHECK(body.to_string() == "early");
  // The other is refused once its wait ends (libzmq does not retry it).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*zap)->rejected() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a counter, bounded
  }
  CHECK((*zap)->rejected() == 1);
  CHECK((*zap)->accepted() == 1);
  (*zap)->Admit({never.public_key});  // too late: its connection is gone
  router.set(zmq::sockopt::rcvtimeo, 300);
  CHECK_FALSE(router.recv(id));
}
