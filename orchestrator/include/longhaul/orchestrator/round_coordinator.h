// Round coordination as pure decisions with reasons.
//
// A RoundAttempt is one try at round r under membership epoch e. Reports are
// checked on arrival (AcceptReport: stale epoch, wrong round, non-participant,
// duplicate are refused with the reason). DecideRound looks at the attempt, the
// clock and which regions are down, and says: keep waiting (and on whom, since
// when), commit (every participant reported ok with one parameter hash), or
// abort (who failed, why, who survives). Nothing here sends or stores anything,
// so every branch is unit-tested with a ManualClock.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "longhaul/common/clock.h"
#include "longhaul/common/status.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

struct RoundAttempt {
  std::string job_id;
  uint32_t round = 0;
  uint64_t epoch = 0;
  std::vector<std::string> participants;  // ring order
  std::vector<std::string> joining;
  // False for sync kind "local": regions never average, so their replicas differ
  // by design and the round commits without hash agreement.
  bool replicas_identical = true;
  Clock::TimePoint started{};
  Clock::TimePoint deadline{};
  double predicted_comm_seconds = 0;
  v1::RoundPlan plan;  // the round's plan, the same in every participant's START (RoundCommand.plan)
  std::map<std::string, v1::RoundReport> reports;
};

enum class RoundOutcome { kWait, kCommit, kAbort };

struct RoundDecision {
  RoundOutcome outcome = RoundOutcome::kWait;
  std::string kind;  // abort: region_down | report_failed | deadline | hash_mismatch
  std::string reason;
  std::vector<std::string> excluded;    // abort: regions dropped from the retry (down, timed out)
  std::vector<std::string> waiting_on;  // wait: participants that have not reported
  std::string param_hash;               // commit: the agreed hash
};

// Ok when the report belongs to this attempt; otherwise the reason to drop it
// (code kAborted for stale epochs so callers can count them separately).
Status AcceptReport(const RoundAttempt& attempt, const v1::RoundReport& report);

RoundDecision DecideRound(const RoundAttempt& attempt, Clock::TimePoint now, const std::set<std::string>& down);

// The committed row: mean loss / val_loss over participants, summed tokens and
// WAN bytes, slowest comm and wall time, checkpoints that were written.
CommittedRound SummarizeCommit(const RoundAttempt& attempt, const std::string& param_hash, double now_unix);

const char* RoundOutcomeName(RoundOutcome o);

}  // namespace longhaul::orchestrator
