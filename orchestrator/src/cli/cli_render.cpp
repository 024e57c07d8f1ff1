// Text and JSON rendering of CLI results: tables and per-region progress bars.
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "longhaul/proto/wire_enums.h"
#include "../job_spec_limits.h"
#include "longhaul/orchestrator/cli.h"

namespace longhaul::orchestrator {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string Bar(uint32_t done, uint32_t total, int width) {
  const int filled = total == 0 ? 0 : static_cast<int>(std::lround(static_cast<double>(done) / total * width));
  std::string s = "[";
  for (int i = 0; i < width; ++i) s += i < filled ? "#" : ".";
  return s + "]";
}

}  // namespace

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return Fixed(b, u == 0 ? 0 : 1) + " " + units[u];
}

std::string HumanSeconds(double s) {
  if (s < 0) return "-";
  if (s < 120) return Fixed(s, s < 10 ? 1 : 0) + " s";
  if (s < 7200) return Fixed(s / 60, 1) + " min";
  return Fixed(s / 3600, 1) + " h";
}

std::string ToJson(const google::protobuf::Message& msg) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(msg, &out, o);
  return out;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = spec_limits::Utf8SequenceLength(s.substr(i));
    if (n == 0) {
      out += "\\ufffd";
      i += 1;
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out + "\"";
}

std::string RenderJobStatus(const v1::JobStatus& s, bool color) {
  std::ostringstream o;
  const char* on = "";
  const char* off = "";
  if (color) {
    off = "\033[0m";
    on = s.state() == "succeeded" ? "\033[32m" : s.state() == "failed" ? "\033[31m" : s.state() == "running" ? "\033[36m" : "\033[33m";
  }
  o << s.job_id() << "  " << s.name() << "  " << on << s.state() << off << "  round " << s.round() << "/"
    << s.total_rounds() << "  epoch " << s.epoch() << "\n";
  o << "  val loss " << (s.val_loss() > 0 ? Fixed(s.val_loss(), 4) : "-");
  if (s.loss_floor() > 0) o << " (floor " << Fixed(s.loss_floor(), 4) << ")";
  o << "   WAN " << HumanBytes(static_cast<double>(s.wan_bytes())) << "   wall " << HumanSeconds(s.wall_seconds());
  o << "   comm/round " << (s.actual_comm_seconds() > 0 ? Fixed(s.actual_comm_seconds(), 2) + " s" : "-")
    << " (predicted " << (s.predicted_comm_seconds() > 0 ? Fixed(s.predicted_comm_seconds(), 2) + " s" : "-") << ")\n";
  if (!s.reason().empty()) o << "  " << s.reason() << "\n";
  if (s.spec().sync().has_adaptive() && s.plan().inner_steps() > 0) {
    o << "  plan H=" << s.plan().inner_steps();
    if (s.plan().overlap_steps() > 0) o << " tau=" << s.plan().overlap_steps();
    o << " " << proto::CodecName(s.plan().codec());
    if (s.plan().predicted_cu() > 0) o << ", predicted CU " << Fixed(100 * s.plan().predicted_cu(), 1) << "%";
    o << " (target " << Fixed(100 * s.spec().sync().adaptive().target_utilisation(), 0) << "%, " << s.replans()
      << " re-plan(s)): " << s.plan().reason() << "\n";
  }
  for (const auto& r : s.regions()) {
    o << "  " << Pad(r.region(), 10) << " " << Bar(r.round(), s.total_rounds(), 20) << " " << Pad(std::to_string(r.round()) + "/" + std::to_string(s.total_rounds()), 7)
      << " loss " << (r.loss() > 0 ? Fixed(r.loss(), 3) : "-    ") << "  val " << (r.val_loss() > 0 ? Fixed(r.val_loss(), 3) : "-    ")
      << "  " << Pad(Fixed(r.tokens_per_second(), 0) + " tok/s", 12) << " ETA " << Pad(r.eta_seconds() > 0 ? HumanSeconds(r.eta_seconds()) : "-", 8)
      << " " << r.state();
    if (!r.waiting_on().empty()) o << "  (" << r.waiting_on() << ")";
    o << "\n";
    if (r.intra_region() != v1::INTRA_REGION_UNSPECIFIED) {
      o << "  " << Pad("", 10) << " intra-region " << proto::IntraRegionName(r.intra_region());
      if (!r.intra_region_reason().empty()) o << ": " << r.intra_region_reason();
      o << "\n";
    }
  }
  if (!s.worker_output().empty()) {
    // Only the job's owner and admins receive it.
    o << "  last output of a failed worker, in " << s.worker_output() << "\n";
  }
  return o.str();
}

std::string RenderJobTable(const v1::JobList& jobs) {
  std::ostringstream o;
  o << Pad("JOB", 12) << Pad("NAME", 20) << Pad("STATE", 11) << Pad("ROUND", 10) << Pad("VAL LOSS", 10) << Pad("WAN", 10)
    << "REASON\n";
  for (const auto& j : jobs.jobs())
    o << Pad(j.job_id(), 12) << Pad(j.name(), 20) << Pad(j.state(), 11)
      << Pad(std::to_string(j.round()) + "/" + std::to_string(j.total_rounds()), 10)
      << Pad(j.val_loss() > 0 ? Fixed(j.val_loss(), 4) : "-", 10) << Pad(HumanBytes(static_cast<double>(j.wan_bytes())), 10)
      << j.reason() << "\n";
  if (jobs.jobs_size() == 0) o << "(no jobs)\n";
  return o.str();
}

std::string RenderRegionTable(const v1::ListRegionsReply& regions) {
  std::ostringstream o;
  o << Pad("REGION", 14) << Pad("STATE", 11) << Pad("WORKERS", 9) << Pad("LAST HEARTBEAT", 16) << Pad("AGENT KEY", 14)
    << "DETAIL\n";
  for (const auto& r : regions.regions())
    o << Pad(r.region(), 14) << Pad(r.state(), 11) << Pad(std::to_string(r.capacity().workers()), 9)
      << Pad(r.last_heartbeat_age_s() < 0 ? "never" : Fixed(r.last_heartbeat_age_s(), 1) + " s ago", 16)
      << Pad(r.agent_key().empty() ? "-" : r.agent_key(), 14) << r.detail() << "\n";
  if (regions.regions_size() == 0) o << "(no regions registered)\n";
  return o.str();
}

}  // namespace longhaul::orchestrator
