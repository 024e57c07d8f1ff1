// Roles on the control plane: the pure decision and the roles file.
#include <catch2/catch.hpp>

#include "longhaul/orchestrator/authorization.h"
#include "longhaul/orchestrator/region_registry.h"

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

TEST_CASE("authorization: removing a region needs an admin key, a job is cancelled by its owner or an admin",
          "[roles]") {
  const KeyRole user{KeyRole::Kind::kUser, {}, "alice"};
  const KeyRole admin{KeyRole::Kind::kAdmin, {}, "ops"};
  v1::ControlMessage remove;
  remove.mutable_remove_region()->set_region("eu-west");
  auto by_user = orchestrator::AuthorizeControl(remove, &user);
  CHECK(by_user.code() == StatusCode::kPermissionDenied);
  CHECK_THAT(by_user.message(), Catch::Contains("'alice' is a user key") && Catch::Contains("needs an admin key"));
  CHECK(orchestrator::AuthorizeControl(remove, &admin).ok());
  v1::ControlMessage submit;
  submit.mutable_submit_job();
  CHECK(orchestrator::AuthorizeControl(submit, &admin).ok());  // an admin is a user too

  const orchestrator::PeerKey alice{"ALICEKEY", "alice", false}, bob{"BOBKEY", "bob", false}, ops{"OPSKEY", "ops", true};
  CHECK(orchestrator::AuthorizeJobControl("job-000001", alice, alice).ok());
  CHECK(orchestrator::AuthorizeJobControl("job-000001", alice, ops).ok());
  auto by_bob = orchestrator::AuthorizeJobControl("job-000001", alice, bob);
  CHECK(by_bob.code() == StatusCode::kPermissionDenied);
  CHECK_THAT(by_bob.message(), Catch::Contains("job-000001 belongs to key 'alice'") && Catch::Contains("'bob'"));
  CHECK(orchestrator::AuthorizeJobControl("job-000001", {}, bob).ok());  // a job from before owners were kept
  // Who sees the job's workers' output: the same keys.
  CHECK(orchestrator::ManagesJob(alice, alice));
  CHECK(orchestrator::ManagesJob(alice, ops));
  CHECK_FALSE(orchestrator::ManagesJob(alice, bob));
}

TEST_CASE("roles file: one role per key, errors name the line", "[roles]") {
  auto roles = wan_transport::ParseRoles("# comment\neu-west agent eu-west eu-central\nalice user  # the CLI\n", "roles");
  REQUIRE(roles.ok());
  CHECK(roles->at("eu-west").kind == KeyRole::Kind::kAgent);
  CHECK(roles->at("eu-west").regions == std::vector<std::string>{"eu-west", "eu-central"});
  CHECK(roles->at("alice").kind == KeyRole::Kind::kUser);
  auto bad = wan_transport::ParseRoles("eu-west boss\n", "roles");
  CHECK_THAT(bad.status().message(), Catch::Contains("roles line 1"));
  auto twice = wan_transport::ParseRoles("a user\na admin\n", "roles");
  CHECK_THAT(twice.status().message(), Catch::Contains("a second role for 'a'"));
  auto user_regions = wan_transport::ParseRoles("a user eu-west\n", "roles");
  CHECK_THAT(user_regions.status().message(), Catch::Contains("takes no regions"));
  auto admin = wan_transport::ParseRoles("ops admin\n", "roles");
  REQUIRE(admin.ok());
  CHECK(admin->at("ops").kind == KeyRole::Kind::kAdmin);
  // An agent line without regions would let its key claim any region name.
  auto wild = wan_transport::ParseRoles("wild agent\n", "roles");
  CHECK_THAT(wild.status().message(), Catch::Contains("roles line 1") && Catch::Contains("must name the regions"));
}
