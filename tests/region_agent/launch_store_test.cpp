// A launch's rendezvous store: set, replace, get, and the limits that keep a
// worker from making its agent hold unbounded memory.
#include <catch2/catch.hpp>

#include "longhaul/region_agent/launch_store.h"

namespace ra = longhaul::region_agent;

TEST_CASE("region_agent: launch store sets, replaces and gets keys, counting their bytes", "[store]") {
  ra::LaunchStore s;
  CHECK_FALSE(s.Get("a").has_value());
  REQUIRE(s.Set("a", "12345").ok());
  CHECK(s.Get("a") == "12345");
  CHECK(s.bytes() == 6);
  REQUIRE(s.Set("a", "1").ok());  // replaced: the old value no longer counts
  CHECK(s.Get("a") == "1");
  CHECK(s.bytes() == 2);
}

TEST_CASE("region_agent: launch store refuses empty or long keys, large values and a full store, naming the key",
          "[store]") {
  ra::LaunchStore s;
  CHECK(s.Set("", "v").message() == "rendezvous key of 0 bytes (1 to 512 allowed)");
  CHECK(s.Set(std::string(513, 'k'), "v").code() == longhaul::StatusCode::kInvalidArgument);
  const auto big = s.Set("big", std::string(ra::LaunchStore::kMaxValueBytes + 1, 'x'));
  CHECK(big.message() == "rendezvous key 'big': a value of 1048577 bytes (at most 1048576)");
  const std::string mib(ra::LaunchStore::kMaxValueBytes, 'x');
  int stored = 0;
  longhaul::Status last;
  for (int i = 0; i < 80 && last.ok(); ++i) {
    std::string key = "k";  // not "k" + ...: GCC 12 warns falsely (-Wrestrict)
    key += std::to_string(i);
    last = s.Set(key, mib);
    stored += last.ok() ? 1 : 0;
  }
  CHECK(stored == 63);  // 64 MiB in all, keys included
  CHECK(last.code() == longhaul::StatusCode::kResourceExhausted);
  CHECK_THAT(last.message(), Catch::Contains("rendezvous key 'k63': the launch's store would hold"));
  CHECK_FALSE(s.Get("k63").has_value());
  CHECK(s.bytes() <= ra::LaunchStore::kMaxTotalBytes);
  // A replacement that does not grow the store still fits.
  CHECK(s.Set("k0", "small").ok());
}

TEST_CASE("region_agent: launch store serves SET and GET requests and refuses another op", "[store]") {
  ra::LaunchStore s;
  longhaul::v1::StoreRequest r;
  r.set_op(longhaul::v1::StoreRequest::SET);
  r.set_key("x");
  r.set_value("y");
  CHECK(s.Serve(r).found());
  r.set_op(longhaul::v1::StoreRequest::GET);
  r.clear_value();
  auto got = s.Serve(r);
  CHECK(got.found());
  CHECK(got.value() == "y");
  r.set_op(longhaul::v1::StoreRequest::OP_UNSPECIFIED);
  CHECK(s.Serve(r).error().code() == longhaul::v1::ERROR_CODE_INVALID_ARGUMENT);
}
