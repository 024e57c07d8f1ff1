// Roles on the control plane: the pure decision and the roles file.
#include <catch2/catch.hpp>

#include "longhaul/orchestrator/authorization.h"

using namespace longhaul;
using wan_transport::KeyRole;

namespace {

v1::ControlMessage Register(const std::string& region) {
  v1::ControlMessage m;
  m.mutable_register_region()->set_region(region);
  return m;
}

}  // namespace

TEST_CASE("authorization: region messages need an agent key bound to that region", "[roles]") {
  const KeyRole agent{KeyRole::Kind::kAgent, {"eu-west"}, "eu-west"};
  const KeyRole any_agent{KeyRole::Kind::kAgent, {}, "fleet"};
  const KeyRole user{KeyRole::Kind::kUser, {}, "alice"};
  CHECK(orchestrator::AuthorizeControl(Register("eu-west"), &agent).ok());
  CHECK(orchestrator::AuthorizeControl(Register("us-east"), &any_agent).ok());
  auto other = orchestrator::AuthorizeControl(Register("us-east"), &agent);
  CHECK(other.code() == StatusCode::kPermissionDenied);
  CHECK_THAT(other.message(), Catch::Contains("may not speak for region 'us-east'"));
  auto by_user = orchestrator::AuthorizeControl(Register("eu-west"), &user);
  CHECK_THAT(by_user.message(), Catch::Contains("'alice' is a user key"));
  v1::ControlMessage hb;
  hb.mutable_heartbeat()->set_region("us-east");
  CHECK_FALSE(orchestrator::AuthorizeControl(hb, &agent).ok());
  v1::ControlMessage report;
  report.mutable_round_report()->set_region("eu-west");
  CHECK(orchestrator::AuthorizeControl(report, &agent).ok());
}

TEST_CASE("authorization: CLI requests need a user key", "[roles]") {
  const KeyRole agent{KeyRole::Kind::kAgent, {"eu-west"}, "eu-west"};
  const KeyRole user{KeyRole::Kind::kUser, {}, "alice"};
  v1::ControlMessage submit;
  submit.mutable_submit_job();
  CHECK(orchestrator::AuthorizeControl(submit, &user).ok());
  auto by_agent = orchestrator::AuthorizeControl(submit, &agent);
  CHECK(by_agent.code() == StatusCode::kPermissionDenied);
  CHECK_THAT(by_agent.message(), Catch::Contains("is an agent key"));
  CHECK(orchestrator::AuthorizeControl(submit, nullptr).ok());  // no roles: --insecure
}

TEST_CASE("roles file: one role per key, errors name the line", "[roles]") {
  auto roles = wan_transport::ParseRoles("# comment\neu-west agent eu-west eu-central\nalice user  # the CLI\n", "roles");
  REQUIRE(roles.ok());
  CHECK(roles->at("eu-west").kind == KeyRole::Kind::kAgent);
  CHECK(roles->at("eu-west").regions == std::vector<std::string>{"eu-west", "eu-central"});
  CHECK(roles->at("alice").kind == KeyRole::Kind::kUser);
  auto bad = wan_transport::ParseRoles("eu-west admin\n", "roles");
  CHECK_THAT(bad.status().message(), Catch::Contains("roles line 1"));
  auto twice = wan_transport::ParseRoles("a user\na agent\n", "roles");
  CHECK_THAT(twice.status().message(), Catch::Contains("a second role for 'a'"));
  auto user_regions = wan_transport::ParseRoles("a user eu-west\n", "roles");
  CHECK_THAT(user_regions.status().message(), Catch::Contains("takes no regions"));
}
