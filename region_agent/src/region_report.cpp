#include "longhaul/region_agent/region_report.h"

#include <algorithm>

#include "longhaul/common/printable_text.h"

namespace longhaul::region_agent {

v1::RoundReport AggregateRegionReport(const std::string& region, const std::vector<v1::RoundReport>& reports) {
  v1::RoundReport out;
  out.set_region(region);
  if (reports.empty()) {
    out.set_ok(false);
    out.mutable_error()->set_code(v1::ERROR_CODE_INTERNAL);
    out.mutable_error()->set_message("no worker reports");
    return out;
  }
  const v1::RoundReport& first = reports.front();
  out.set_job_id(first.job_id());
  out.set_round(first.round());
  out.set_epoch(first.epoch());
  out.set_param_hash(first.param_hash());
  out.set_val_loss(first.val_loss());
  out.set_checkpoint_path(first.checkpoint_path());
  bool ok = true;
  double loss_sum = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    const v1::RoundReport& r = reports[i];
    loss_sum += r.loss();
    out.set_tokens(out.tokens() + r.tokens());
    out.set_wan_bytes_sent(out.wan_bytes_sent() + r.wan_bytes_sent());
    out.set_compute_seconds(std::max(out.compute_seconds(), r.compute_seconds()));
    out.set_comm_seconds(std::max(out.comm_seconds(), r.comm_seconds()));
    out.set_wall_seconds(std::max(out.wall_seconds(), r.wall_seconds()));
    out.set_inner_steps(std::max(out.inner_steps(), r.inner_steps()));  // the same in every worker
    if (!r.ok() && ok) {
      // A worker's words: cleaned and capped; its own code's text only for the job's owner.
      ok = false;
      *out.mutable_error() = r.error();
      out.mutable_error()->set_message("worker " + std::to_string(i) + ": " + PrintableTail(r.error().message(), 2048));
      const std::string output = PrintableTail(r.error().worker_output(), kMaxWorkerOutputBytes);
      out.mutable_error()->set_worker_output(output.empty() ? "" : "worker " + std::to_string(i) + ":\n" + output);
    }
  }
  if (ok) {
    for (size_t i = 1; i < reports.size(); ++i) {
      if (reports[i].param_hash() != first.param_hash()) {
        ok = false;
        out.mutable_error()->set_code(v1::ERROR_CODE_INTERNAL);
        out.mutable_error()->set_message("workers of region " + region + " disagree on theta: worker 0 has " +
                                         first.param_hash() + ", worker " + std::to_string(i) + " has " +
                                         reports[i].param_hash());
        break;
      }
    }
  }
  out.set_ok(ok);
  out.set_loss(loss_sum / static_cast<double>(reports.size()));
  if (!ok) out.clear_checkpoint_path();
  return out;
}

v1::RoundReport FailedRoundReport(const v1::RoundCommand& start, const std::string& region, const v1::Error& error) {
  v1::RoundReport out;
  out.set_job_id(start.job_id());
  out.set_round(start.round());
  out.set_epoch(start.epoch());
  out.set_region(region);
  out.set_ok(false);
  *out.mutable_error() = error;
  return out;
}

}  // namespace longhaul::region_agent
