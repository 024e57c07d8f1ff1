#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <prometheus/counter.h>

#include "longhaul/monitoring/metrics_server.h"
#include "longhaul/monitoring/web_config.h"
#include "monitoring/scrape_client.h"
#include "monitoring/tls_fixture.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace std::chrono_literals;


TEST_CASE("MetricsServer serves registered metrics on a free port", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  auto& family = prometheus::BuildCounter().Name("longhaul_test_events_total").Help("test").Register((*server)->registry());
  family.Add({{"region", "eu"}}).Increment(3);
  std::string body = testing::HttpGet((*server)->port(), "/metrics").value_or("");
  REQUIRE(body.find("longhaul_test_events_total{region=\"eu\"} 3") != std::string::npos);
}

TEST_CASE("MetricsServer refuses a malformed address", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("no-port-here");
  REQUIRE_FALSE(server.ok());
  REQUIRE(server.status().message().find("no-port-here") != std::string::npos);
}

TEST_CASE("MetricsServer: idle connections do not hold up a scrape", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  // Several clients connect and send nothing (a port scanner, a stuck proxy).
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>((*server)->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    idle.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto body = testing::HttpGet((*server)->port(), "/metrics");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int fd : idle) ::close(fd);
  REQUIRE(body.has_value());
  CHECK(seconds < 5.0);  // before: ~30 s, until the idle connections timed out
}

// ---------------------------------------------------------------------------
// The server of our own: idle connections, limits, HTTP, TLS and basic auth.

namespace {

constexpr auto kPrometheusScrapeTimeout = 10s;  // Prometheus's default scrape_timeout
constexpr const char* kProbeLine = "longhaul_test_probe_total{region=\"eu\"} 5";

void AddProbe(monitoring::MetricsServer& server) {
  auto& family = prometheus::BuildCounter().Name("longhaul_test_probe_total").Help("probe").Register(server.registry());
  family.Add({{"region", "eu"}}).Increment(5);
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t ThreadCount() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

void CheckScrape(const std::optional<testing::HttpReply>& reply) {
  REQUIRE(reply.has_value());
  INFO(reply->headers);
  CHECK(reply->status == 200);
  CHECK(Contains(reply->body, kProbeLine));
  CHECK(reply->seconds < std::chrono::duration<double>(kPrometheusScrapeTimeout).count());
}

}  // namespace

TEST_CASE("MetricsServer answers scrapes while 200 idle connections are held open and reopened",
          "[monitoring]") {
  monitoring::MetricsServerOptions options;
  options.request_timeout = 300ms;  // the server drops idle connections fast; the crowd reopens them
  auto server = monitoring::MetricsServer::Start(options);
  REQUIRE(server.ok());
  AddProbe(**server);
  testing::IdleCrowd crowd((*server)->port(), 200, /*reopen=*/true, /*max_duration=*/60s);
  // Every one of the 200 dropped by the server and reopened twice, on average.
  REQUIRE(crowd.WaitFor([](const testing::IdleCrowd& c) { return c.reopened() >= 400 || !c.running(); }, 40s));
  REQUIRE(crowd.running());
  for (int i = 0; i < 5; ++i) CheckScrape(testing::Scrape((*server)->port(), kPrometheusScrapeTimeout));
  // The churn goes on after the scrapes, and so does serving.
  const size_t reopened = crowd.reopened();
  REQUIRE(crowd.WaitFor([&](const testing::IdleCrowd& c) { return c.reopened() >= reopened + 200; }, 30s));
  CheckScrape(testing::Scrape((*server)->port(), kPrometheusScrapeTimeout));
  crowd.Stop();
  CHECK_FALSE(crowd.running());
  CHECK(crowd.open() == 0);
}

TEST_CASE("MetricsServer: 200 idle connections under the default request timeout do not delay scrapes",
          "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  AddProbe(**server);
  testing::IdleCrowd crowd((*server)->port(), 200, /*reopen=*/true, /*max_duration=*/60s);
  REQUIRE(crowd.WaitFor([](const testing::IdleCrowd& c) { return c.open() >= 200 || !c.running(); }, 20s));
  for (int i = 0; i < 3; ++i) CheckScrape(testing::Scrape((*server)->port(), kPrometheusScrapeTimeout));
}

TEST_CASE("MetricsServer closes the oldest idle connection beyond max_connections, so a scrape gets in",
          "[monitoring]") {
  monitoring::MetricsServerOptions options;
  options.max_connections = 50;
  auto server = monitoring::MetricsServer::Start(options);
  REQUIRE(server.ok());
  AddProbe(**server);
  testing::IdleCrowd crowd((*server)->port(), 200, /*reopen=*/false, /*max_duration=*/60s);
  // 200 connected; the server kept the newest 50 and closed the rest.
  REQUIRE(crowd.WaitFor([](const testing::IdleCrowd& c) { return c.dropped() >= 150 || !c.running(); }, 20s));
  CHECK(crowd.open() <= 50);
  CheckScrape(testing::Scrape((*server)->port(), kPrometheusScrapeTimeout));
  // The scrape took the place of the oldest idle connection.
  CHECK(crowd.WaitFor([](const testing::IdleCrowd& c) { return c.dropped() >= 151; }, 10s));
}

TEST_CASE("MetricsServer speaks HTTP/1.1: status codes, headers, Connection: close", "[monitoring]") {
  monitoring::MetricsServerOptions options;
  options.request_timeout = 500ms;
  auto server = monitoring::MetricsServer::Start(options);
  REQUIRE(server.ok());
  AddProbe(**server);
  const int port = (*server)->port();
  CHECK((*server)->url() == "http://127.0.0.1:" + std::to_string(port) + "/metrics");

  auto ok = testing::Scrape(port);
  REQUIRE(ok.has_value());
  INFO(ok->headers);
  CHECK(ok->status == 200);
  CHECK(Contains(ok->headers, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  CHECK(Contains(ok->headers, "Connection: close\r\n"));
  CHECK(Contains(ok->headers, "Content-Length: " + std::to_string(ok->body.size()) + "\r\n"));
  CHECK(Contains(ok->body, "# TYPE longhaul_test_probe_total counter"));

  auto head = testing::RawHttp(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(head.has_value());
  CHECK(head->status == 200);
  CHECK(head->body.empty());

  auto http10 = testing::RawHttp(port, "GET /metrics?name[]=x HTTP/1.0\n\n");  // bare LFs, a query string
  REQUIRE(http10.has_value());
  CHECK(http10->status == 200);
  CHECK(Contains(http10->body, kProbeLine));

  for (const char* path : {"/", "/metric", "/metrics/x"}) {
    auto r = testing::RawHttp(port, std::string("GET ") + path + " HTTP/1.1\r\n\r\n");
    REQUIRE(r.has_value());
    CHECK(r->status == 404);
  }
  auto post = testing::RawHttp(port, "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  REQUIRE(post.has_value());
  CHECK(post->status == 405);
  CHECK(Contains(post->headers, "Allow: GET, HEAD\r\n"));
  for (const char* garbage : {"hello\r\n\r\n", "GET /metrics\r\n\r\n", "GET metrics HTTP/1.1\r\n\r\n",
                              "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", "GET /metrics SPDY/3\r\n\r\n"}) {
    auto r = testing::RawHttp(port, garbage);
    INFO(garbage);
    REQUIRE(r.has_value());
    CHECK(r->status == 400);
  }
  // Headers over 8 KiB: refused, and the answer still arrives although the
  // client was still sending (the server reads what is left before closing).
  auto big = testing::RawHttp(port, "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n");
  REQUIRE(big.has_value());
  CHECK(big->status == 431);

  // Half a request, then silence: closed once request_timeout has passed.
  const int fd = testing::ConnectLoopback(port, 1s);
  REQUIRE(fd >= 0);
  REQUIRE(::send(fd, "GET /met", 8, MSG_NOSIGNAL) == 8);
  pollfd p{fd, POLLIN, 0};
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::poll(&p, 1, 5000) == 1);
  char c;
  CHECK(::recv(fd, &c, 1, 0) == 0);  // EOF, no answer
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  ::close(fd);
  CheckScrape(testing::Scrape(port));
}

TEST_CASE("MetricsServer's destructor stops its thread and closes every socket", "[monitoring]") {
  const size_t threads_before = ThreadCount();
  int port = 0, idle = -1;
  {
    auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
    REQUIRE(server.ok());
    port = (*server)->port();
    CHECK(ThreadCount() == threads_before + 1);
    idle = testing::ConnectLoopback(port, 1s);
    REQUIRE(idle >= 0);
    REQUIRE(testing::Scrape(port).has_value());  // the idle one has been accepted by now
  }
  CHECK(ThreadCount() == threads_before);
  pollfd p{idle, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  char c;
  CHECK(::recv(idle, &c, 1, MSG_DONTWAIT) <= 0);  // closed by the server
  ::close(idle);
  CHECK(testing::ConnectLoopback(port, 1s) < 0);  // nothing listens any more
}

TEST_CASE("MetricsServer serves HTTPS with basic auth from a Prometheus web.yml", "[monitoring][tls]") {
  testing::TempDir tmp("metrics-tls");
  std::string log;
  auto files = testing::MakeSelfSignedCert(tmp.path(), &log);
  INFO(log);
  REQUIRE(files.has_value());
  const std::string password = "s3cret pass:word";
  const std::string hash = testing::BcryptHash(password);
  REQUIRE(monitoring::IsBcryptHash(hash));
  // cert.pem and key.pem are relative: resolved against web.yml's folder.
  testing::WriteFile(tmp.path() / "web.yml", "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
                                             "  min_version: TLS12\n  client_auth_type: NoClientCert\n"
                                             "basic_auth_users:\n  prometheus: '" + hash + "'\n");
  monitoring::MetricsServerOptions options;
  options.web_config_file = (tmp.path() / "web.yml").string();
  auto server = monitoring::MetricsServer::Start(options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  AddProbe(**server);
  const int port = (*server)->port();
  CHECK((*server)->tls());
  CHECK((*server)->url() == "https://127.0.0.1:" + std::to_string(port) + "/metrics");

  const std::string get = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n";
  const auto request = [&](const std::string& headers) {
    std::string error;
    auto reply = testing::TlsHttp(port, get + headers + "\r\n", files->cert, &error);
    INFO(error);
    REQUIRE(reply.has_value());
    return *reply;
  };
  const auto none = request("");
  CHECK(none.status == 401);
  CHECK(Contains(none.headers, "WWW-Authenticate: Basic realm=\"longhaul\"\r\n"));
  CHECK_FALSE(Contains(none.body, "longhaul_test_probe_total"));
  CHECK(request(testing::BasicAuthHeader("prometheus", "wrong")).status == 401);
  CHECK(request(testing::BasicAuthHeader("nobody", password)).status == 401);
  CHECK(request("Authorization: Basic !!!notbase64\r\n").status == 401);
  CHECK(request("Authorization: Bearer abc\r\n").status == 401);
  for (int i = 0; i < 3; ++i) {  // the first checks bcrypt, the next ones hit the cache
    const auto right = request(testing::BasicAuthHeader("prometheus", password));
    INFO(right.headers);
    CHECK(right.status == 200);
    CHECK(Contains(right.body, kProbeLine));
    CHECK(Contains(right.headers, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  }
  CHECK(request(testing::BasicAuthHeader("prometheus", password + "x")).status == 401);  // not a cache hit
  // Plain HTTP on the TLS port gets no HTTP answer.
  CHECK_FALSE(testing::RawHttp(port, "GET /metrics HTTP/1.1\r\n\r\n", 5s).has_value());
}

TEST_CASE("MetricsServer asks for basic auth over plain HTTP when web.yml has only users", "[monitoring]") {
  testing::TempDir tmp("metrics-auth");
  const std::string hash = testing::BcryptHash("pw");
  REQUIRE(monitoring::IsBcryptHash(hash));
  testing::WriteFile(tmp.path() / "web.yml", "basic_auth_users:\n  scraper: " + hash + "\n");
  monitoring::MetricsServerOptions options;
  options.web_config_file = (tmp.path() / "web.yml").string();
  auto server = monitoring::MetricsServer::Start(options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  AddProbe(**server);
  CHECK_FALSE((*server)->tls());
  CHECK((*server)->url().rfind("http://", 0) == 0);
  auto denied = testing::Scrape((*server)->port());
  REQUIRE(denied.has_value());
  CHECK(denied->status == 401);
  auto head = testing::RawHttp((*server)->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  REQUIRE(head.has_value());
  CHECK(head->status == 401);
  CheckScrape(testing::RawHttp((*server)->port(),
                               "GET /metrics HTTP/1.1\r\n" + testing::BasicAuthHeader("scraper", "pw") + "\r\n"));
}

TEST_CASE("LoadWebConfig reads Prometheus's web.yml and refuses what it does not support, naming it",
          "[monitoring]") {
  testing::TempDir tmp("web-config");
  const auto path = tmp.path() / "web.yml";
  const auto load = [&](const std::string& text) {
    testing::WriteFile(path, text);
    return monitoring::LoadWebConfig(path);
  };
  const auto refused = [&](const std::string& text) {
    auto r = load(text);
    REQUIRE_FALSE(r.ok());
    CHECK(Contains(r.status().message(), path.string()));
    return r.status().message();
  };
  testing::WriteFile(tmp.path() / "cert.pem", "x");  // LoadWebConfig checks they can be read, not what they hold
  testing::WriteFile(tmp.path() / "key.pem", "x");
  const std::string hash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

  SECTION("a valid file; relative paths resolve against its folder") {
    auto r = load("tls_server_config:\n  cert_file: cert.pem\n  key_file: " + (tmp.path() / "key.pem").string() +
                  "\n  min_version: TLS13\nbasic_auth_users:\n  alice: " + hash + "\n  bob: '" + hash + "'\n");
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    REQUIRE(r->tls.has_value());
    CHECK(r->tls->cert_file == tmp.path() / "cert.pem");
    CHECK(r->tls->key_file == tmp.path() / "key.pem");
    CHECK(r->tls->min_version == monitoring::TlsVersion::kTls13);
    CHECK(r->basic_auth_users.size() == 2);
    CHECK(r->basic_auth_users.at("alice") == hash);
  }
  SECTION("an empty file, or an empty tls_server_config, is plain HTTP without auth") {
    for (const char* text : {"", "# nothing\n", "tls_server_config:\nbasic_auth_users:\n", "tls_server_config: {}\n"}) {
      auto r = load(text);
      INFO(text);
      REQUIRE(r.ok());
      CHECK_FALSE(r->tls.has_value());
      CHECK(r->basic_auth_users.empty());
    }
  }
  SECTION("an unknown top-level key") {
    const auto m = refused("tls_server_config: {}\nbasic_auth_userz: {}\n");
    CHECK(Contains(m, "basic_auth_userz"));
    CHECK(Contains(m, "line 2"));
  }
  SECTION("an unknown key inside tls_server_config") {
    CHECK(Contains(refused("tls_server_config:\n  cert_file: cert.pem\n  key_fiel: key.pem\n"),
                   "tls_server_config.key_fiel"));
  }
  SECTION("options this server does not implement") {
    CHECK(Contains(refused("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
                           "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"),
                   "tls_server_config.cipher_suites"));
    CHECK(Contains(refused("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
                           "  client_auth_type: RequireAndVerifyClientCert\n"),
                   "tls_server_config.client_auth_type"));
    CHECK(Contains(refused("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS10\n"),
                   "tls_server_config.min_version"));
    CHECK(Contains(refused("http_server_config:\n  http2: false\n"), "http_server_config"));
  }
  SECTION("a user whose hash is not bcrypt is named, the value is not echoed") {
    const auto m = refused("basic_auth_users:\n  alice: " + hash + "\n  mallory: plaintext-password\n");
    CHECK(Contains(m, "mallory"));
    CHECK_FALSE(Contains(m, "plaintext-password"));
    CHECK(Contains(refused("basic_auth_users:\n  md5user: $1$abcdefgh$0123456789012345678901\n"), "md5user"));
    CHECK(Contains(refused("basic_auth_users:\n  short: " + hash.substr(0, 59) + "\n"), "short"));
  }
  SECTION("a missing cert file is named with its field") {
    const auto m = refused("tls_server_config:\n  cert_file: missing.pem\n  key_file: key.pem\n");
    CHECK(Contains(m, "tls_server_config.cert_file"));
    CHECK(Contains(m, (tmp.path() / "missing.pem").string()));
    CHECK(Contains(refused("tls_server_config:\n  cert_file: cert.pem\n"), "tls_server_config.key_file"));
  }
  SECTION("a file that is not there, or not YAML") {
    auto r = monitoring::LoadWebConfig(tmp.path() / "nope.yml");
    REQUIRE_FALSE(r.ok());
    CHECK(Contains(r.status().message(), (tmp.path() / "nope.yml").string()));
    CHECK(Contains(refused("tls_server_config: [\n"), "YAML"));
    CHECK(Contains(refused("- a\n- b\n"), "mapping"));
  }
}

TEST_CASE("MetricsServer::Start names the web config, certificate or key it cannot use", "[monitoring][tls]") {
  testing::TempDir tmp("metrics-badtls");
  monitoring::MetricsServerOptions options;
  options.web_config_file = (tmp.path() / "web.yml").string();
  {
    auto r = monitoring::MetricsServer::Start(options);  // no web.yml at all
    REQUIRE_FALSE(r.ok());
    CHECK(Contains(r.status().message(), options.web_config_file));
  }
  testing::WriteFile(tmp.path() / "web.yml", "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n");
  testing::WriteFile(tmp.path() / "cert.pem", "not a certificate\n");
  testing::WriteFile(tmp.path() / "key.pem", "not a key\n");
  {
    auto r = monitoring::MetricsServer::Start(options);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().ToString());
    CHECK(Contains(r.status().message(), (tmp.path() / "cert.pem").string()));
  }
  // A real certificate with another certificate's key.
  std::string log;
  std::filesystem::create_directories(tmp.path() / "a");
  std::filesystem::create_directories(tmp.path() / "b");
  auto a = testing::MakeSelfSignedCert(tmp.path() / "a", &log);
  auto b = testing::MakeSelfSignedCert(tmp.path() / "b", &log);
  INFO(log);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  testing::WriteFile(tmp.path() / "web.yml", "tls_server_config:\n  cert_file: a/cert.pem\n  key_file: b/key.pem\n");
  {
    auto r = monitoring::MetricsServer::Start(options);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().ToString());
    CHECK(Contains(r.status().message(), "does not match"));
    CHECK(Contains(r.status().message(), (tmp.path() / "b" / "key.pem").string()));
  }
}
