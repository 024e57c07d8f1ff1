// Checksums for frames, chunks and parameter hashes (xxHash XXH3, 64-bit).
// Protobuf parsing is not an integrity check: random bytes often parse, so every
// frame and chunk carries one of these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace longhaul {

uint64_t Checksum64(const void* data, size_t size);
inline uint64_t Checksum64(std::span<const std::byte> bytes) { return Checksum64(bytes.data(), bytes.size()); }
inline uint64_t Checksum64(std::string_view s) { return Checksum64(s.data(), s.size()); }
// Hash of a float vector's exact bit pattern, as 16 hex digits: the replica
// identity check compares these across regions every round.
std::string ParameterHash(std::span<const float> params);
// Whether `s` has ParameterHash's form (16 lower-case hex digits).
bool IsParameterHash(std::string_view s);

}  // namespace longhaul
