#include <catch2/catch.hpp>

#include <vector>

#include "longhaul/common/checksum.h"

using namespace longhaul;

TEST_CASE("Parameter hash changes when a single bit changes", "[checksum]") {
  std::vector<float> a(1000, 0.5f);
  std::vector<float> b = a;
  REQUIRE(ParameterHash(a) == ParameterHash(b));
  REQUIRE(ParameterHash(a).size() == 16);
  b[999] = std::nextafter(b[999], 1.0f);
  REQUIRE(ParameterHash(a) != ParameterHash(b));
}

TEST_CASE("Checksum64 is deterministic over content", "[checksum]") {
  REQUIRE(Checksum64(std::string_view("longhaul")) == Checksum64(std::string_view("longhaul")));
  REQUIRE(Checksum64(std::string_view("longhaul")) != Checksum64(std::string_view("longhauL")));
}
