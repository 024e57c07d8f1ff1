// Framing and versioning of every longhaul wire message.
//
// A frame is   "LHF1" | u32 payload length (LE) | u64 XXH3 of payload (LE) | payload
// where the payload is a serialized protobuf message. Protobuf parsing is not an
// integrity check (random bytes often parse), so the frame's length bound and
// checksum reject garbage before the parser sees it, and the protocol version
// inside the message is checked after parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/v1/data.pb.h"

namespace longhaul::proto {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 16;
inline constexpr size_t kMaxControlFrameBytes = size_t{16} << 20;  // 16 MiB: job specs, statuses
inline constexpr size_t kMaxDataHeaderBytes = size_t{64} << 10;    // chunk headers are small

// Serializes msg into a frame.
std::string EncodeFrame(const google::protobuf::MessageLite& msg);
// Checks magic, length bound and checksum, then parses into msg.
Status DecodeFrame(std::string_view frame, size_t max_payload_bytes, google::protobuf::MessageLite* msg);

// Control-plane envelope helpers: Encode stamps the protocol version; Decode
// refuses garbage and any other version with a message naming both versions.
std::string EncodeControl(v1::ControlMessage msg);
Result<v1::ControlMessage> DecodeControl(std::string_view frame);

std::string EncodeData(v1::DataFrame msg);
Result<v1::DataFrame> DecodeData(std::string_view frame);

// Status <-> wire Error.
v1::Error ToWireError(const Status& status);
Status FromWireError(const v1::Error& error);

// Name of the body case of a control message, for logs ("round_report").
std::string BodyName(const v1::ControlMessage& msg);

}  // namespace longhaul::proto
