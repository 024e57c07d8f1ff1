// Fuzz target: the region agent's handling of control messages, without its
// sockets and child processes. Agent::HandleOrchestratorFrame
// (region_agent/src/agent.cpp) decodes a frame and dispatches on the body; the
// parts that decide anything from the message's contents are pure functions,
// called here as the agent calls them:
//   job_assignment -> worker::AdmitJob (worker/src/job_config.cpp), then
//                     CommandPolicy::Check (region_agent/src/command_policy.cpp);
//   round_command  -> FailedRoundReport (the START of a job not running here);
//   error          -> proto::FromWireError;
//   round_report   -> (worker -> agent) AggregateRegionReport over the reports seen.
// Nothing is launched; AdmitJob and Check only stat/open files named by the input
// (read-only, a data file, a checkpoint, argv[0] on PATH, a working directory).
//
// Input: byte 0 mode (bits 0-1: 0 each record is a raw frame, 1 a ControlMessage
// wrapped in a valid frame, 2 as 1 with protocol_version set to 1; bit 2: the
// agent's region is the assignment's own, so admission gets past the region
// check), then up to 8 records { u16 n; n bytes }.
// Properties: no crash, UB or uncaught exception; every report the agent would
// send to the orchestrator decodes there.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_proto.h"
#include "longhaul/proto/frame.h"
#include "longhaul/region_agent/command_policy.h"
#include "longhaul/region_agent/region_report.h"
#include "longhaul/worker/job_config.h"

namespace {

using namespace longhaul;

constexpr size_t kMaxInput = 64 << 10;
constexpr size_t kMaxRecords = 8;
constexpr int kCapacityWorkers = 4;
constexpr const char* kRegion = "eu-west";

// What the orchestrator does with a report the agent sends.
void CheckOutgoing(const v1::RoundReport& report) {
  v1::ControlMessage msg;
  *msg.mutable_round_report() = report;
  msg.set_sender(report.region());
  LONGHAUL_FUZZ_CHECK(proto::DecodeControl(proto::EncodeControl(std::move(msg))).ok());
}

const region_agent::CommandPolicy& Policy() {
  static const region_agent::CommandPolicy policy{{"/bin/true", "/usr/bin/env"}, {fuzz::ProcessTempDir::Get()}};
  return policy;
}

void OnAssignment(const v1::JobAssignment& a, bool own_region) {
  const std::string region = own_region ? a.region() : kRegion;
  auto config = worker::AdmitJob(a, region, kCapacityWorkers);
  if (!config.ok()) return;
  LONGHAUL_FUZZ_CHECK(config->workers <= static_cast<uint32_t>(kCapacityWorkers));
  (void)region_agent::CommandPolicy{}.Check(*config, region);  // an agent allowing no programs
  (void)Policy().Check(*config, region);
}

void OnRoundCommand(const v1::RoundCommand& cmd) {
  v1::Error err;
  err.set_code(v1::ERROR_CODE_NOT_FOUND);
  err.set_message("job " + cmd.job_id() + " is not running in region " + kRegion);
  CheckOutgoing(region_agent::FailedRoundReport(cmd, kRegion, err));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const int quiet = fuzz::InitializeQuietly();
  (void)Policy();
  return quiet;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  fuzz::Reader in(data, size);
  const uint8_t mode = in.U8();
  std::vector<v1::RoundReport> worker_reports;
  for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
    const std::string_view bytes = in.Bytes(in.U16());
    std::string frame;
    switch (mode & 3) {
      case 0:
        frame.assign(bytes);
        break;
      case 1:
        frame = fuzz::WrapFrame(bytes);
        break;
      default: {
        v1::ControlMessage msg;
        if (!msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) continue;
        frame = proto::EncodeControl(std::move(msg));
        break;
      }
    }
    auto msg = proto::DecodeControl(frame);
    if (!msg.ok()) continue;
    switch (msg->body_case()) {
      case v1::ControlMessage::kJobAssignment:
        OnAssignment(msg->job_assignment(), (mode & 4) != 0);
        break;
      case v1::ControlMessage::kRoundCommand:
        if (msg->round_command().kind() == v1::RoundCommand::START) OnRoundCommand(msg->round_command());
        break;
      case v1::ControlMessage::kError:
        (void)proto::FromWireError(msg->error());
        break;
      case v1::ControlMessage::kRoundReport:
        worker_reports.push_back(msg->round_report());
        break;
      default:
        (void)proto::BodyName(*msg);
        break;
    }
  }
  if (!worker_reports.empty()) CheckOutgoing(region_agent::AggregateRegionReport(kRegion, worker_reports));
  return 0;
}
