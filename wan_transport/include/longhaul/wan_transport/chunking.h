// Splitting a tensor into chunks and putting it back together.
//
// A transfer of T bytes is cut into ceil(T / stride) chunks (one empty chunk when
// T == 0); chunk i covers [i*stride, min((i+1)*stride, T)). Each chunk travels
// with a TensorChunkHeader carrying its offset, length, index, count and the
// XXH3-64 of its payload (on plaintext links, see Integrity). Reassembly writes each payload straight into the final
// buffer (the caller's, or one it allocates once), accepts chunks in any order
// and from any connection, and checks that the chunks tile the transfer exactly,
// so a forged or corrupted header can never report a partial buffer as complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/v1/data.pb.h"

namespace longhaul::wan_transport {

struct ChunkSpan {
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t index = 0;
};

// A buffer of n bytes (copied from `from` when given). Large buffers are backed by
// transparent huge pages where the kernel allows it: first-touch page faults
// otherwise dominate moving hundreds of MiB on a VM.
std::vector<std::byte> AllocateTransferBuffer(size_t n, std::span<const std::byte> from = {});

// The chunks of a transfer of total_bytes with the given stride (> 0).
std::vector<ChunkSpan> PlanChunks(uint64_t total_bytes, size_t stride);

// What guards a chunk's bytes. On a CURVE link every ZeroMQ message carries a
// Poly1305 tag that ZeroMQ verifies before delivering it (a corrupted or forged
// message ends the connection), which already covers every payload byte: the
// XXH3 checksum would be a second pass over the bytes that can never fail. On a
// plaintext link the checksum is the only end-to-end check. Both ends of a link
// have the same encryption setting (a CURVE socket and a plain one cannot connect).
enum class Integrity {
  kChecksum,            // XXH3-64 of the payload in the header, verified on receipt
  kAuthenticatedLink,   // checksum left 0 and not verified: the link authenticates every byte
};

// Fills the size/position/checksum fields of a chunk header.
void FillChunkHeader(const ChunkSpan& chunk, uint64_t total_bytes, uint32_t chunk_count,
                     std::span<const std::byte> payload, v1::TensorChunkHeader* header,
                     Integrity integrity = Integrity::kChecksum);

class Reassembly {
 public:
  enum class Outcome { kAccepted, kDuplicate, kBadChecksum };

  // dest: where the bytes go (must be exactly total_bytes long); empty = allocate.
  Reassembly(uint64_t total_bytes, uint32_t chunk_count, std::span<std::byte> dest = {});
  // Assembles into `buffer` (exactly total_bytes long), handed back by TakeBuffer().
  Reassembly(uint64_t total_bytes, uint32_t chunk_count, std::vector<std::byte>&& buffer);

  // kInvalidArgument (naming the field) when the header does not fit this transfer;
  // kBadChecksum when the payload does not match its checksum (nothing is
  // written; only checked with Integrity::kChecksum).
  Result<Outcome> Add(const v1::TensorChunkHeader& header, std::span<const std::byte> payload,
                      Integrity integrity = Integrity::kChecksum);

  bool complete() const { return received_chunks_ == chunk_count_; }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t received_bytes() const { return received_bytes_; }
  uint32_t chunk_count() const { return chunk_count_; }
  // The assembled bytes (only meaningful once complete()); empty when a caller buffer was used.
  std::vector<std::byte> TakeBuffer() { return std::move(owned_); }

 private:
  Status CheckGeometry(const v1::TensorChunkHeader& h, size_t payload_size);

  uint64_t total_bytes_;
  uint32_t chunk_count_;
  uint64_t stride_ = 0;  // learned from the first chunk, then enforced
  std::vector<std::byte> owned_;
  std::span<std::byte> dest_;
  std::vector<bool> have_;
  uint32_t received_chunks_ = 0;
  uint64_t received_bytes_ = 0;
};

}  // namespace longhaul::wan_transport
