// Fuzz target: the job-spec parser and validator (orchestrator/src/job_spec_yaml.cpp,
// job_spec_validate.cpp), the two ways a spec reaches the orchestrator.
//
// Input: a first byte 0x00 means the rest is a serialized longhaul.v1.JobSpec as
// it arrives in SubmitJob over the wire (admission: FillJobDefaults, then
// ValidateJobSpec, as Orchestrator::HandleSubmit does); anything else is YAML
// text given whole to ParseJobSpecYaml (what `longhaul submit` reads).
// Properties: errors are Status values, never crashes or exceptions; a spec the
// YAML parser accepts is complete (filling defaults again changes nothing) and
// passes ValidateJobSpec (the orchestrator re-validates every spec it receives).
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_proto.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/job_defaults.h"

namespace {

using namespace longhaul;

constexpr size_t kMaxInput = 128 << 10;

void CheckAccepted(const v1::JobSpec& spec) {
  LONGHAUL_FUZZ_CHECK(orchestrator::ValidateJobSpec(spec).ok());
  v1::JobSpec refilled = spec;
  proto::FillJobDefaults(&refilled);
  LONGHAUL_FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(refilled, spec));
  (void)orchestrator::RequiredRegions(spec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::InitializeQuietly(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  if (size > 0 && data[0] == 0) {
    v1::JobSpec spec;
    if (!spec.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
    proto::FillJobDefaults(&spec);
    if (orchestrator::ValidateJobSpec(spec).ok()) (void)orchestrator::RequiredRegions(spec);
    return 0;
  }
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto spec = orchestrator::ParseJobSpecYaml(yaml, "fuzz.yaml");
  if (spec.ok()) CheckAccepted(*spec);
  return 0;
}
