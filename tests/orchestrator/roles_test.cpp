// Roles against the real orchestrator: a CLI user's key cannot register (and so
// take over) a region, an agent key cannot register another region or use the
// CLI protocol.
#include <catch2/catch.hpp>

#include "harness.h"
#include <fstream>
#include <sstream>

#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/control_client.h"
#include "longhaul/orchestrator/endpoint_file.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/wan_transport/curve.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;

}  // namespace

TEST_CASE("roles: the orchestrator refuses region messages from user keys and CLI requests from agent keys",
          "[roles]") {
  const TempDir tmp("roles");
  const fs::path& dir = tmp.path();
  MakeKeys(dir / "keys", {"orchestrator", "eu-west", "cli"}, {"eu-west", "cli"});
  Subprocess orch;  // declared after tmp: killed before the folder is removed
  REQUIRE(orch.Start({kBin + "/longhaul-orchestrator", "--bind", "tcp://127.0.0.1:0", "--init", "--state",
              (dir / "state.sqlite").string(), "--key", (dir / "keys/orchestrator.key").string(), "--allowlist",
              (dir / "keys/allow").string(), "--endpoint-file", (dir / "endpoint").string()},
             {.log_path = (dir / "orchestrator.log").string()}).ok());
  auto ep = orchestrator::WaitForEndpointFile(dir / "endpoint", 10s);
  REQUIRE(ep.ok());
  auto client = [&](const std::string& key) {
    orchestrator::ControlClientOptions co;
    co.endpoint = ep->control;
    co.own_keys = wan_transport::LoadKeyPair(dir / "keys" / (key + ".key")).value();
    co.server_public_key = ep->public_key;
    return std::move(orchestrator::ControlClient::Connect(co).value());
  };
  auto reg = [](const std::string& region) {
    v1::ControlMessage m;
    m.mutable_register_region()->set_region(region);
    m.mutable_register_region()->mutable_capacity()->set_workers(1);
    return m;
  };
  auto error_of = [](const Result<v1::ControlMessage>& r) {
    return r.ok() && r->has_error() ? r->error().message() : std::string("no error: ") + (r.ok() ? "" : r.status().ToString());
  };
  // The CLI user's key tries to register the region eu-west.
  auto by_user = client("cli")->Call(reg("eu-west"));
  CHECK_THAT(error_of(by_user), Catch::Contains("'cli' is an admin key"));
  // eu-west's agent key may register eu-west, not us-east.
  auto other = client("eu-west")->Call(reg("us-east"));
  CHECK_THAT(error_of(other), Catch::Contains("may not speak for region 'us-east'"));
  auto own = client("eu-west")->Call(reg("eu-west"));
  REQUIRE(own.ok());
  CHECK(own->register_reply().accepted());
  // An agent key cannot use the CLI protocol.
  v1::ControlMessage list;
  list.mutable_list_jobs();
  CHECK_THAT(error_of(client("eu-west")->Call(list)), Catch::Contains("is an agent key"));
  auto listed = client("cli")->Call(list);
  REQUIRE(listed.ok());
  CHECK(listed->has_job_list());
}

TEST_CASE("roles: a region name stays with the agent key that registered it, across a restart, until removed",
          "[roles]") {
  const TempDir tmp("roles-bind");
  const fs::path& dir = tmp.path();
  MakeKeys(dir / "keys", {"orchestrator", "eu-west", "cli"}, {"eu-west", "cli"});
  {  // a spare agent key allowed to speak for eu-west too
    auto keys = wan_transport::GenerateCurveKeyPair().value();
    REQUIRE(wan_transport::WriteKeyPair(dir / "keys", "spare", keys).ok());
    fs::copy_file(dir / "keys/spare.pub", dir / "keys/allow/spare.pub");
    std::ofstream(dir / "keys/allow/roles", std::ios::app) << "spare agent eu-west\n";
  }
  Subprocess orch;  // declared after tmp: killed before the folder is removed
  auto start = [&] {
    fs::remove(dir / "endpoint");
    REQUIRE(orch.Start({kBin + "/longhaul-orchestrator", "--bind", "tcp://127.0.0.1:0", "--init", "--state",
                (dir / "state.sqlite").string(), "--key", (dir / "keys/orchestrator.key").string(), "--allowlist",
                (dir / "keys/allow").string(), "--endpoint-file", (dir / "endpoint").string()},
               {.log_path = (dir / "orchestrator.log").string()}).ok());
    auto ep = orchestrator::WaitForEndpointFile(dir / "endpoint", 10s);
    REQUIRE(ep.ok());
    return *ep;
  };
  auto ep = start();
  auto call = [&](const std::string& key, const v1::ControlMessage& m) {
    orchestrator::ControlClientOptions co;
    co.endpoint = ep.control;
    co.own_keys = wan_transport::LoadKeyPair(dir / "keys" / (key + ".key")).value();
    co.server_public_key = ep.public_key;
    auto c = std::move(orchestrator::ControlClient::Connect(co).value());
    auto r = c->Call(m);
    REQUIRE(r.ok());
    return *r;
  };
  v1::ControlMessage reg;
  reg.mutable_register_region()->set_region("eu-west");
  reg.mutable_register_region()->mutable_capacity()->set_workers(1);
  REQUIRE(call("eu-west", reg).register_reply().accepted());
  auto taken = call("spare", reg);
  CHECK_FALSE(taken.register_reply().accepted());
  CHECK_THAT(taken.register_reply().reason(), Catch::Contains("bound to agent key 'eu-west'"));

  // The binding is in the state file: a restarted orchestrator still refuses the spare key.
  orch.Kill();
  ep = start();
  CHECK_FALSE(call("spare", reg).register_reply().accepted());

  // The CLI releases the name (the region is down since the restart, so no --force).
  std::ostringstream out, err;
  orchestrator::CliContext ctx;
  ctx.orchestrator = ep.control;
  ctx.key_file = (dir / "keys/cli.key").string();
  ctx.server_key_file = (dir / "keys/orchestrator.pub").string();
  ctx.out = &out;
  ctx.err = &err;
  REQUIRE(orchestrator::CliRemoveRegion(ctx, "eu-west", false) == orchestrator::kExitOk);
  CHECK_THAT(out.str(), Catch::Contains("eu-west"));
  CHECK(call("spare", reg).register_reply().accepted());
}

TEST_CASE("roles: a job is cancelled by the key that submitted it or an admin key, removing a region needs an admin",
          "[roles]") {
  const TempDir tmp("roles-owner");
  const fs::path& dir = tmp.path();
  MakeKeys(dir / "keys", {"orchestrator", "cli", "user1", "user2"}, {"cli", "user1", "user2"});
  Subprocess orch;  // declared after tmp: killed before the folder is removed
  REQUIRE(orch.Start({kBin + "/longhaul-orchestrator", "--bind", "tcp://127.0.0.1:0", "--init", "--state",
                      (dir / "state.sqlite").string(), "--key", (dir / "keys/orchestrator.key").string(),
                      "--allowlist", (dir / "keys/allow").string(), "--endpoint-file", (dir / "endpoint").string()},
                     {.log_path = (dir / "orchestrator.log").string()})
              .ok());
  auto ep = orchestrator::WaitForEndpointFile(dir / "endpoint", 10s);
  REQUIRE(ep.ok());
  auto call = [&](const std::string& key, const v1::ControlMessage& m) {
    orchestrator::ControlClientOptions co;
    co.endpoint = ep->control;
    co.own_keys = wan_transport::LoadKeyPair(dir / "keys" / (key + ".key")).value();
    co.server_public_key = ep->public_key;
    auto c = std::move(orchestrator::ControlClient::Connect(co).value());
    return c->Call(m);  // an error reply comes back as its Status
  };
  auto submit = [&](const std::string& key) {
    v1::ControlMessage m;
    *m.mutable_submit_job()->mutable_spec() = orchestrator::DefaultJobSpec();
    const auto reply = call(key, m);
    REQUIRE(reply.ok());
    REQUIRE(reply->has_submit_job_reply());
    return reply->submit_job_reply().job_id();
  };
  auto cancel = [&](const std::string& key, const std::string& job) {
    v1::ControlMessage m;
    m.mutable_cancel_job()->set_job_id(job);
    return call(key, m);
  };
  const std::string mine = submit("user1");
  const auto refused = cancel("user2", mine);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kPermissionDenied);
  CHECK_THAT(refused.status().message(), Catch::Contains(mine + " belongs to key 'user1'") && Catch::Contains("'user2'"));
  const auto own = cancel("user1", mine);
  REQUIRE(own.ok());
  CHECK(own->job_status().state() == "cancelled");
  CHECK_THAT(own->job_status().reason(), Catch::Contains("cancelled by key 'user1'"));
  const std::string other = submit("user1");
  const auto by_admin = cancel("cli", other);
  REQUIRE(by_admin.ok());
  CHECK(by_admin->job_status().state() == "cancelled");
  // The owner survives a restart (it is in the state file).
  const std::string kept = submit("user1");
  orch.Kill();
  fs::remove(dir / "endpoint");
  REQUIRE(orch.Start({kBin + "/longhaul-orchestrator", "--bind", "tcp://127.0.0.1:0", "--state",
                      (dir / "state.sqlite").string(), "--key", (dir / "keys/orchestrator.key").string(),
                      "--allowlist", (dir / "keys/allow").string(), "--endpoint-file", (dir / "endpoint").string()},
                     {.log_path = (dir / "orchestrator.log").string()})
              .ok());
  ep = orchestrator::WaitForEndpointFile(dir / "endpoint", 10s);
  REQUIRE(ep.ok());
  CHECK(cancel("user2", kept).status().code() == StatusCode::kPermissionDenied);
  CHECK(cancel("user1", kept).ok());
  v1::ControlMessage remove;
  remove.mutable_remove_region()->set_region("eu-west");
  const auto by_user = call("user1", remove);
  REQUIRE_FALSE(by_user.ok());
  CHECK_THAT(by_user.status().message(), Catch::Contains("needs an admin key"));
}
