#include "longhaul/proto/frame.h"

#include <cstring>

#include "longhaul/common/checksum.h"

namespace longhaul::proto {

namespace {

constexpr char kMagic[4] = {'L', 'H', 'F', '1'};

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

Status CheckVersion(uint32_t got, const char* what) {
  if (got == kProtocolVersion) return Status::Ok();
  return VersionMismatch(std::string(what) + " has protocol version " + std::to_string(got) +
                         ", this build speaks version " + std::to_string(kProtocolVersion));
}

}  // namespace

std::string EncodeFrame(const google::protobuf::MessageLite& msg) {
  std::string payload = msg.SerializeAsString();
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  out.append(kMagic, sizeof(kMagic));
  PutLe(out, payload.size(), 4);
  PutLe(out, Checksum64(payload), 8);
  out += payload;
  return out;
}

Status DecodeFrame(std::string_view frame, size_t max_payload_bytes, google::protobuf::MessageLite* msg) {
  if (frame.size() < kFrameHeaderBytes)
    return DataLoss("frame of " + std::to_string(frame.size()) + " bytes is shorter than the " +
                    std::to_string(kFrameHeaderBytes) + "-byte header");
  if (std::memcmp(frame.data(), kMagic, sizeof(kMagic)) != 0) return DataLoss("frame does not start with magic LHF1");
  const uint64_t length = GetLe(frame.data() + 4, 4);
  if (length > max_payload_bytes)
    return ResourceExhausted("frame payload of " + std::to_string(length) + " bytes exceeds the limit of " +
                             std::to_string(max_payload_bytes));
  if (length != frame.size() - kFrameHeaderBytes)
    return DataLoss("frame header says " + std::to_string(length) + " payload bytes, got " +
                    std::to_string(frame.size() - kFrameHeaderBytes));
  std::string_view payload = frame.substr(kFrameHeaderBytes);
  if (GetLe(frame.data() + 8, 8) != Checksum64(payload)) return DataLoss("frame checksum mismatch");
  if (!msg->ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return DataLoss("frame payload is not a valid " + msg->GetTypeName());
  return Status::Ok();
}

std::string EncodeControl(v1::ControlMessage msg) {
  msg.set_protocol_version(kProtocolVersion);
  return EncodeFrame(msg);
}

Result<v1::ControlMessage> DecodeControl(std::string_view frame) {
  v1::ControlMessage msg;
  LONGHAUL_RETURN_IF_ERROR(DecodeFrame(frame, kMaxControlFrameBytes, &msg));
  LONGHAUL_RETURN_IF_ERROR(CheckVersion(msg.protocol_version(), "control message"));
  if (msg.body_case() == v1::ControlMessage::BODY_NOT_SET) return InvalidArgument("control message has no body");
  return msg;
}

std::string EncodeData(v1::DataFrame msg) {
  msg.set_protocol_version(kProtocolVersion);
  return EncodeFrame(msg);
}

Result<v1::DataFrame> DecodeData(std::string_view frame) {
  v1::DataFrame msg;
  LONGHAUL_RETURN_IF_ERROR(DecodeFrame(frame, kMaxDataHeaderBytes, &msg));
  LONGHAUL_RETURN_IF_ERROR(CheckVersion(msg.protocol_version(), "data frame"));
  if (msg.body_case() == v1::DataFrame::BODY_NOT_SET) return InvalidArgument("data frame has no body");
  return msg;
}

v1::Error ToWireError(const Status& status) {
  v1::Error e;
  e.set_code(static_cast<v1::ErrorCode>(static_cast<int>(status.code())));
  e.set_message(status.message());
  return e;
}

Status FromWireError(const v1::Error& error) {
  const int code = static_cast<int>(error.code());
  if (code >= static_cast<int>(StatusCode::kInvalidArgument) && code <= static_cast<int>(StatusCode::kInternal))
    return Status(static_cast<StatusCode>(code), error.message());
  if (error.code() == v1::ERROR_CODE_STALE_EPOCH || error.code() == v1::ERROR_CODE_WRONG_JOB)
    return FailedPrecondition(error.message());
  return Internal(error.message().empty() ? "unknown remote error" : error.message());
}

std::string BodyName(const v1::ControlMessage& msg) {
  const auto* field = msg.GetDescriptor()->FindFieldByNumber(static_cast<int>(msg.body_case()));
  return field ? field->name() : "none";
}

}  // namespace longhaul::proto
