#include "longhaul/wan_transport/chunking.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "longhaul/common/checksum.h"

namespace longhaul::wan_transport {

std::vector<std::byte> AllocateTransferBuffer(size_t n, std::span<const std::byte> from) {
  std::vector<std::byte> v;
  v.reserve(n);
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (n >= 2 * kHuge) {
    // Advise the whole huge-page-aligned interior before anything touches it.
    auto begin = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
    auto end = (reinterpret_cast<uintptr_t>(v.data()) + n) & ~(kHuge - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
  if (from.empty()) v.resize(n);
  else v.assign(from.begin(), from.end());
  return v;
}

std::vector<ChunkSpan> PlanChunks(uint64_t total_bytes, size_t stride) {
  std::vector<ChunkSpan> out;
  if (stride == 0) stride = 1;
  if (total_bytes == 0) return {ChunkSpan{}};
  out.reserve((total_bytes + stride - 1) / stride);
  for (uint64_t off = 0; off < total_bytes; off += stride) {
    out.push_back({off, static_cast<uint32_t>(std::min<uint64_t>(stride, total_bytes - off)),
                   static_cast<uint32_t>(out.size())});
  }
  return out;
}

void FillChunkHeader(const ChunkSpan& chunk, uint64_t total_bytes, uint32_t chunk_count,
                     std::span<const std::byte> payload, v1::TensorChunkHeader* h, Integrity integrity) {
  h->set_offset(chunk.offset);
  h->set_length(chunk.length);
  h->set_chunk_index(chunk.index);
  h->set_chunk_count(chunk_count);
  h->set_total_bytes(total_bytes);
  h->set_checksum(integrity == Integrity::kChecksum ? Checksum64(payload) : 0);
}

Reassembly::Reassembly(uint64_t total_bytes, uint32_t chunk_count, std::span<std::byte> dest)
    : total_bytes_(total_bytes), chunk_count_(chunk_count), dest_(dest), have_(chunk_count, false) {
  if (dest_.empty() && total_bytes_ > 0) {
    owned_ = AllocateTransferBuffer(total_bytes_);
    dest_ = owned_;
  }
}

Reassembly::Reassembly(uint64_t total_bytes, uint32_t chunk_count, std::vector<std::byte>&& buffer)
    : total_bytes_(total_bytes), chunk_count_(chunk_count), owned_(std::move(buffer)), have_(chunk_count, false) {
  owned_.resize(total_bytes_);
  dest_ = owned_;
}

Status Reassembly::CheckGeometry(const v1::TensorChunkHeader& h, size_t payload_size) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument("chunk " + std::to_string(h.chunk_index()) + " of transfer " +
                           std::to_string(h.transfer_id()) + ": " + what);
  };
  if (h.total_bytes() != total_bytes_) return bad("total_bytes " + std::to_string(h.total_bytes()) + " != " + std::to_string(total_bytes_));
  if (h.chunk_count() != chunk_count_) return bad("chunk_count " + std::to_string(h.chunk_count()) + " != " + std::to_string(chunk_count_));
  if (h.chunk_index() >= chunk_count_) return bad("chunk_index out of range");
  if (payload_size != h.length()) return bad("payload is " + std::to_string(payload_size) + " bytes, header says " + std::to_string(h.length()));
  if (h.offset() > total_bytes_ || h.length() > total_bytes_ - h.offset()) return bad("offset+length past the end of the transfer");
  if (total_bytes_ == 0) return Status::Ok();
  // Every chunk implies the stride; all must agree, which makes the chunks tile
  // [0, total) without gaps or overlaps.
  bool last = h.chunk_index() + 1 == chunk_count_;
  uint64_t stride;
  if (!last) {
    stride = h.length();
  } else if (chunk_count_ == 1) {
    stride = total_bytes_;
  } else {
    if (h.offset() % (chunk_count_ - 1) != 0) return bad("last chunk offset is not a multiple of the stride");
    stride = h.offset() / (chunk_count_ - 1);
  }
  if (stride == 0) return bad("zero-length chunk in a non-empty transfer");
  if (stride_ != 0 && stride != stride_) return bad("inconsistent chunk stride");
  if (h.offset() != uint64_t{h.chunk_index()} * stride) return bad("offset does not match chunk_index");
  if (last ? (h.offset() + h.length() != total_bytes_ || h.length() == 0 || h.length() > stride) : false) {
    return bad("last chunk does not end the transfer");
  }
  if ((chunk_count_ - 1) * stride >= total_bytes_ || chunk_count_ * stride < total_bytes_) {
    return bad("chunk_count does not fit total_bytes with stride " + std::to_string(stride));
  }
  stride_ = stride;
  return Status::Ok();
}

Result<Reassembly::Outcome> Reassembly::Add(const v1::TensorChunkHeader& h, std::span<const std::byte> payload,
                                            Integrity integrity) {
  LONGHAUL_RETURN_IF_ERROR(CheckGeometry(h, payload.size()));
  if (have_[h.chunk_index()]) return Outcome::kDuplicate;
  if (integrity == Integrity::kChecksum && Checksum64(payload) != h.checksum()) return Outcome::kBadChecksum;
  if (!payload.empty()) std::memcpy(dest_.data() + h.offset(), payload.data(), payload.size());
  have_[h.chunk_index()] = true;
  ++received_chunks_;
  received_bytes_ += payload.size();
  return Outcome::kAccepted;
}

}  // namespace longhaul::wan_transport
