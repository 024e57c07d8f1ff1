#include "longhaul/orchestrator/round_coordinator.h"

#include <algorithm>
#include <chrono>

#include "longhaul/common/join.h"

namespace longhaul::orchestrator {
namespace {

std::string Prefix(const RoundAttempt& a) {
  return "round " + std::to_string(a.round) + " epoch " + std::to_string(a.epoch) + ": ";
}

}  // namespace

const char* RoundOutcomeName(RoundOutcome o) {
  switch (o) {
    case RoundOutcome::kWait: return "wait";
    case RoundOutcome::kCommit: return "commit";
    case RoundOutcome::kAbort: return "abort";
  }
  return "?";
}

Status AcceptReport(const RoundAttempt& a, const v1::RoundReport& r) {
  if (r.job_id() != a.job_id)
    return Status(StatusCode::kInvalidArgument, "report for job '" + r.job_id() + "' while running " + a.job_id);
  if (r.epoch() != a.epoch)
    return Aborted("stale report from " + r.region() + ": epoch " + std::to_string(r.epoch()) + ", current epoch " +
                   std::to_string(a.epoch));
  if (r.round() != a.round)
    return Aborted("report from " + r.region() + " for round " + std::to_string(r.round()) + ", current round " +
                   std::to_string(a.round));
  if (std::find(a.participants.begin(), a.participants.end(), r.region()) == a.participants.end())
    return FailedPrecondition("report from " + r.region() + ", which is not a participant of " + Prefix(a) +
                              Join(a.participants));
  if (a.reports.count(r.region())) return Status(StatusCode::kAlreadyExists, "duplicate report from " + r.region());
  if (r.ok() && r.param_hash().empty()) return InvalidArgument("ok report from " + r.region() + " without a param_hash");
  return Status::Ok();
}

RoundDecision DecideRound(const RoundAttempt& a, Clock::TimePoint now, const std::set<std::string>& down) {
  RoundDecision d;
  // 1. A participant that is down cannot finish the collective: abort now rather
  //    than waiting for the round deadline.
  for (const auto& p : a.participants)
    if (down.count(p) && !a.reports.count(p)) d.excluded.push_back(p);
  if (!d.excluded.empty()) {
    d.outcome = RoundOutcome::kAbort;
    d.kind = "region_down";
    d.reason = Prefix(a) + Join(d.excluded) + (d.excluded.size() == 1 ? " is" : " are") + " down";
    return d;
  }
  // 2. A failed report aborts. Its region stays for the retry (the failure is
  //    usually a peer that vanished mid-collective, which rule 1 or the deadline
  //    handles) unless it says it does not run the job at all (agent restarted,
  //    or its workers died and it stopped the job): then it is dropped and
  //    assigned the job again.
  for (const auto& [region, r] : a.reports) {
    if (!r.ok()) {
      d.outcome = RoundOutcome::kAbort;
      d.kind = "report_failed";
      if (r.error().code() == v1::ERROR_CODE_NOT_FOUND || r.error().code() == v1::ERROR_CODE_FAILED_PRECONDITION)
        d.excluded.push_back(region);
      d.reason = Prefix(a) + region + " failed: " + (r.error().message().empty() ? "no reason given" : r.error().message());
      return d;
    }
  }
  for (const auto& p : a.participants)
    if (!a.reports.count(p)) d.waiting_on.push_back(p);
  const double waited = std::chrono::duration<double>(now - a.started).count();
  if (!d.waiting_on.empty()) {
    if (now >= a.deadline) {
      d.outcome = RoundOutcome::kAbort;
      d.kind = "deadline";
      d.excluded = d.waiting_on;
      d.reason = Prefix(a) + "deadline passed after " + std::to_string(static_cast<int>(waited)) +
                 " s; no report from " + Join(d.waiting_on);
      d.waiting_on.clear();
      return d;
    }
    d.reason = Prefix(a) + "waiting for " + Join(d.waiting_on) + " (" + std::to_string(static_cast<int>(waited)) + " s)";
    return d;
  }
  // 3. Everyone reported ok: commit only if every hash agrees.
  std::map<std::string, std::vector<std::string>> by_hash;
  for (const auto& [region, r] : a.reports) by_hash[r.param_hash()].push_back(region);
  if (!a.replicas_identical) {
    d.outcome = RoundOutcome::kCommit;
    d.reason = Prefix(a) + "all " + std::to_string(a.participants.size()) +
               " participants reported; local-only replicas are not compared";
    return d;
  }
  if (by_hash.size() != 1) {
    d.outcome = RoundOutcome::kAbort;
    d.kind = "hash_mismatch";
    std::string groups;
    for (const auto& [hash, regions] : by_hash) groups += (groups.empty() ? "" : "; ") + hash + " from " + Join(regions);
    d.reason = Prefix(a) + "parameter hashes disagree: " + groups;
    return d;
  }
  d.outcome = RoundOutcome::kCommit;
  d.param_hash = by_hash.begin()->first;
  d.reason = Prefix(a) + "all " + std::to_string(a.participants.size()) + " participants agree on " + d.param_hash;
  return d;
}

CommittedRound SummarizeCommit(const RoundAttempt& a, const std::string& param_hash, double now_unix) {
  CommittedRound c;
  c.job_id = a.job_id;
  c.round = a.round;
  c.epoch = a.epoch;
  c.param_hash = param_hash;
  c.participants = a.participants;
  c.predicted_comm_seconds = a.predicted_comm_seconds;
  c.committed_at = now_unix;
  double n = 0;
  for (const auto& [region, r] : a.reports) {
    c.loss += r.loss();
    c.val_loss += r.val_loss();
    n += 1;
    c.tokens += r.tokens();
    c.wan_bytes += r.wan_bytes_sent();
    c.comm_seconds = std::max(c.comm_seconds, r.comm_seconds());
    c.wall_seconds = std::max(c.wall_seconds, r.wall_seconds());
    c.compute_seconds += r.compute_seconds();
    c.regions.push_back({.region = region,
                         .inner_steps = r.inner_steps(),
                         .tokens = r.tokens(),
                         .compute_seconds = r.compute_seconds(),
                         .comm_seconds = r.comm_seconds(),
                         .wall_seconds = r.wall_seconds()});
    if (!r.checkpoint_path().empty()) c.checkpoints.emplace_back(region, r.checkpoint_path());
  }
  if (n > 0) {
    c.loss /= n;
    c.val_loss /= n;
    c.compute_seconds /= n;
  }
  return c;
}

}  // namespace longhaul::orchestrator
