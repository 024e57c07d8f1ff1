// The C ABI's status codes are longhaul::StatusCode's, every one of them, and a
// failing call returns the code of what went wrong with a message naming it.
#include "longhaul/session/c_api.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "longhaul/common/status.h"

using longhaul::StatusCode;

TEST_CASE("c_api: every status code has its LH_ constant with StatusCode's value", "[c_api]") {
  const std::pair<int, StatusCode> codes[] = {
      {LH_OK, StatusCode::kOk},
      {LH_INVALID_ARGUMENT, StatusCode::kInvalidArgument},
      {LH_NOT_FOUND, StatusCode::kNotFound},
      {LH_ALREADY_EXISTS, StatusCode::kAlreadyExists},
      {LH_FAILED_PRECONDITION, StatusCode::kFailedPrecondition},
      {LH_DEADLINE_EXCEEDED, StatusCode::kDeadlineExceeded},
      {LH_UNAVAILABLE, StatusCode::kUnavailable},
      {LH_DATA_LOSS, StatusCode::kDataLoss},
      {LH_PERMISSION_DENIED, StatusCode::kPermissionDenied},
      {LH_ABORTED, StatusCode::kAborted},
      {LH_CANCELLED, StatusCode::kCancelled},
      {LH_RESOURCE_EXHAUSTED, StatusCode::kResourceExhausted},
      {LH_VERSION_MISMATCH, StatusCode::kVersionMismatch},
      {LH_INTERNAL, StatusCode::kInternal},
  };
  std::set<std::string_view> names;
  for (const auto& [c, code] : codes) {
    INFO(longhaul::StatusCodeName(code));
    CHECK(c == static_cast<int>(code));
    names.insert(longhaul::StatusCodeName(code));
  }
  // Every StatusCode is listed: the values run 0..kInternal without a gap, each named.
  CHECK(std::size(codes) == static_cast<size_t>(StatusCode::kInternal) + 1);
  CHECK(names.size() == std::size(codes));
  CHECK(names.count("UNKNOWN") == 0);
}

TEST_CASE("c_api: a failing call returns its status code and names the problem", "[c_api]") {
  CHECK(lh_session_open(nullptr) == LH_INVALID_ARGUMENT);
  CHECK_THAT(lh_last_error(), Catch::Contains("lh_session_open: out is NULL"));
  float p = 0;
  CHECK(lh_session_start(nullptr, &p, 1) == LH_INVALID_ARGUMENT);
  CHECK(lh_session_start_model(nullptr, &p, 1, 0, nullptr, 1) == LH_INVALID_ARGUMENT);
  int event = 0;
  CHECK(lh_session_step(nullptr, 0, 0, &event) == LH_INVALID_ARGUMENT);
  CHECK_THAT(lh_last_error(), Catch::Contains("session is NULL"));
  // Outside a job: the agent's environment is missing.
  ::unsetenv("LONGHAUL_AGENT_ENDPOINT");
  lh_session* s = nullptr;
  CHECK(lh_session_open(&s) == LH_FAILED_PRECONDITION);
  CHECK(s == nullptr);
  CHECK_THAT(lh_last_error(), Catch::Contains("LONGHAUL_AGENT_ENDPOINT is not set"));
}
