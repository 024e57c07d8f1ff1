// The CLI commands: connect with a deadline, one request, render, exit code.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <iostream>
#include <thread>

#include "cli_request.h"
#include "longhaul/common/random_token.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/control_client.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/proto/frame.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {
namespace {

std::ostream& Out(const CliContext& c) { return c.out ? *c.out : std::cout; }
std::ostream& Err(const CliContext& c) { return c.err ? *c.err : std::cerr; }

Result<std::unique_ptr<ControlClient>> Connect(const CliContext& ctx) {
  ControlClientOptions o;
  o.endpoint = ctx.orchestrator;
  o.insecure = ctx.insecure;
  o.timeout = ctx.timeout;
  if (o.endpoint.empty())
    return InvalidArgument("no orchestrator given: pass --orchestrator tcp://HOST:PORT or set LONGHAUL_ORCHESTRATOR");
  if (!ctx.insecure) {
    if (ctx.key_file.empty()) return InvalidArgument("no client key given: pass --key FILE.key or set LONGHAUL_KEY");
    if (ctx.server_key_file.empty())
      return InvalidArgument("no orchestrator public key given: pass --server-key FILE.pub or set LONGHAUL_SERVER_KEY");
    auto keys = wan_transport::LoadKeyPair(ctx.key_file);
    if (!keys.ok()) return InvalidArgument(keys.status().message());
    auto server = wan_transport::LoadPublicKey(ctx.server_key_file);
    if (!server.ok()) return InvalidArgument(server.status().message());
    o.own_keys = *keys;
    o.server_public_key = *server;
  }
  return ControlClient::Connect(o);
}

Result<v1::ControlMessage> Request(const CliContext& ctx, v1::ControlMessage req) {
  LONGHAUL_ASSIGN_OR_RETURN(auto client, Connect(ctx));
  return client->Call(std::move(req));
}

}  // namespace

Result<v1::ControlMessage> CliRequest(const CliContext& ctx, v1::ControlMessage req) { return Request(ctx, std::move(req)); }

namespace {

// 128 random bits: unique per submit without coordination.
std::string RandomIdempotencyKey() { return "cli-" + RandomToken(); }

}  // namespace

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument: return kExitUsage;
    case StatusCode::kUnavailable:
    case StatusCode::kPermissionDenied: return kExitUnreachable;
    default: return kExitFailed;
  }
}

int ReportFailure(const CliContext& ctx, int code, const std::string& message) {
  if (ctx.json)
    Out(ctx) << "{\"error\":" << JsonQuote(message) << ",\"code\":" << code << "}\n";
  else
    Err(ctx) << "longhaul: " << message << "\n";
  return code;
}

int ReportError(const CliContext& ctx, const Status& s) { return ReportFailure(ctx, ExitCodeFor(s), s.message()); }

int CliSubmit(const CliContext& ctx, const std::string& job_file, bool watch, std::string idempotency_key) {
  // Every problem with the file itself is bad input (2), a missing file too.
  auto text = ReadJobFile(job_file);
  if (!text.ok()) return ReportFailure(ctx, kExitUsage, text.status().message());
  auto spec = ParseJobSpecYaml(*text, std::filesystem::path(job_file).filename().string());
  if (!spec.ok()) return ReportFailure(ctx, kExitUsage, "bad job file: " + spec.status().message());
  if (idempotency_key.empty()) idempotency_key = RandomIdempotencyKey();
  v1::ControlMessage req;
  *req.mutable_submit_job()->mutable_spec() = *spec;
  req.mutable_submit_job()->set_idempotency_key(idempotency_key);
  auto client = Connect(ctx);
  if (!client.ok()) return ReportError(ctx, client.status());
  auto reply = (*client)->Call(req, std::chrono::milliseconds(1000));
  if (!reply.ok()) return ReportError(ctx, reply.status());
  const std::string& id = reply->submit_job_reply().job_id();
  if (ctx.json) Out(ctx) << ToJson(reply->submit_job_reply()) << "\n";
  else if (reply->submit_job_reply().existing())
    Out(ctx) << id << " (" << spec->name() << ") was submitted before with idempotency key " << idempotency_key << "\n";
  else Out(ctx) << "submitted " << id << " (" << spec->name() << ")\n";
  if (!watch) return kExitOk;
  return CliStatus(ctx, id, true, std::chrono::milliseconds(1000));
}

int CliStatus(const CliContext& ctx, const std::string& job_id, bool watch, std::chrono::milliseconds interval) {
  if (job_id.empty()) {
    if (watch) return ReportFailure(ctx, kExitUsage, "status --watch needs a job id");
    return CliJobs(ctx);
  }
  auto client = Connect(ctx);
  if (!client.ok()) return ReportError(ctx, client.status());
  const bool tty = !ctx.json && ctx.out == nullptr && ::isatty(STDOUT_FILENO);
  // --watch ends when the job does; each poll is bounded by the client timeout.
  for (;;) {
    v1::ControlMessage req;
    req.mutable_job_status_request()->set_job_id(job_id);
    auto reply = (*client)->Call(req);
    if (!reply.ok()) return ReportError(ctx, reply.status());
    const v1::JobStatus& st = reply->job_status();
    if (ctx.json) Out(ctx) << ToJson(st) << "\n";
    else Out(ctx) << (tty && watch ? "\033[H\033[2J" : "") << RenderJobStatus(st, tty);
    Out(ctx).flush();
    const bool done = IsTerminalJobState(st.state());
    if (!watch || done) return watch && ParseJobState(st.state()) != JobState::kSucceeded ? kExitFailed : kExitOk;
    std::this_thread::sleep_for(interval);
  }
}

int CliJobs(const CliContext& ctx) {
  auto client = Connect(ctx);
  if (!client.ok()) return ReportError(ctx, client.status());
  v1::JobList all;
  std::string token;
  do {
    v1::ControlMessage req;
    req.mutable_list_jobs()->set_page_token(token);
    auto reply = (*client)->Call(req, std::chrono::milliseconds(1000));
    if (!reply.ok()) return ReportError(ctx, reply.status());
    for (auto& j : *reply->mutable_job_list()->mutable_jobs()) *all.add_jobs() = std::move(j);
    if (!reply->job_list().next_page_token().empty() && reply->job_list().next_page_token() <= token)
      return ReportFailure(ctx, kExitFailed, "the orchestrator's job list did not advance past '" + token + "'");
    token = reply->job_list().next_page_token();
  } while (!token.empty());
  if (ctx.json) Out(ctx) << ToJson(all) << "\n";
  else Out(ctx) << RenderJobTable(all);
  return kExitOk;
}

int CliCancel(const CliContext& ctx, const std::string& job_id) {
  v1::ControlMessage req;
  req.mutable_cancel_job()->set_job_id(job_id);
  auto reply = Request(ctx, req);
  if (!reply.ok()) return ReportError(ctx, reply.status());
  if (ctx.json) Out(ctx) << ToJson(reply->job_status()) << "\n";
  else Out(ctx) << "cancelled " << job_id << "\n";
  return kExitOk;
}

int CliRegions(const CliContext& ctx) {
  v1::ControlMessage req;
  req.mutable_list_regions();
  auto reply = Request(ctx, req);
  if (!reply.ok()) return ReportError(ctx, reply.status());
  if (ctx.json) Out(ctx) << ToJson(reply->list_regions_reply()) << "\n";
  else Out(ctx) << RenderRegionTable(reply->list_regions_reply());
  return kExitOk;
}

int CliRemoveRegion(const CliContext& ctx, const std::string& region, bool force) {
  v1::ControlMessage req;
  req.mutable_remove_region()->set_region(region);
  req.mutable_remove_region()->set_force(force);
  auto reply = Request(ctx, req);
  if (!reply.ok()) return ReportError(ctx, reply.status());
  const auto& r = reply->remove_region_reply();
  if (ctx.json) Out(ctx) << ToJson(r) << "\n";
  else
    Out(ctx) << "removed region " << r.region()
             << (r.released_key().empty() ? "" : "; agent key '" + r.released_key() + "' released") << "\n";
  return kExitOk;
}

int CliKeysGen(const CliContext& ctx, const std::string& dir, const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos)
    return ReportFailure(ctx, kExitUsage, "--name must be a plain file name, got '" + name + "'");
  auto keys = wan_transport::GenerateCurveKeyPair();
  if (!keys.ok()) return ReportError(ctx, keys.status());
  Status w = wan_transport::WriteKeyPair(dir, name, *keys);
  if (!w.ok())
    return ReportFailure(ctx, w.code() == StatusCode::kAlreadyExists ? kExitUsage : kExitFailed, w.message());
  const std::string key_file = dir + "/" + name + ".key", pub_file = dir + "/" + name + ".pub";
  if (ctx.json)
    Out(ctx) << "{\"key_file\":" << JsonQuote(key_file) << ",\"pub_file\":" << JsonQuote(pub_file)
             << ",\"public_key\":" << JsonQuote(keys->public_key) << "}\n";
  else
    Out(ctx) << "wrote " << key_file << " (secret, mode 0600) and " << pub_file << "\npublic key: " << keys->public_key
             << "\n";
  return kExitOk;
}

}  // namespace longhaul::orchestrator
