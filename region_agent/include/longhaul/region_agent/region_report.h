// The region's RoundReport, made from its workers' reports.
//
// Each worker reports its own figures for one (round, epoch). The region is ok
// only when every worker is ok AND every worker holds the same parameters (the
// intra-region all-gather must leave identical replicas; a mismatch is reported
// as an error rather than hidden behind worker 0's hash).
#pragma once

#include <string>
#include <vector>

#include "longhaul/v1/control.pb.h"

namespace longhaul::region_agent {

// `reports` holds one report per worker, in rank order, all for the same round.
v1::RoundReport AggregateRegionReport(const std::string& region, const std::vector<v1::RoundReport>& reports);

// A failed report for a round this region cannot run (crashed worker, unknown job).
v1::RoundReport FailedRoundReport(const v1::RoundCommand& start, const std::string& region, const v1::Error& error);

}  // namespace longhaul::region_agent
