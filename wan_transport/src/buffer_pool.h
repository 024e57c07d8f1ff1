// BufferPool: recycled transfer buffers for one WanEndpoint.
//
// Memory new to a process costs a page fault and a kernel page clear per page
// on first touch; on the 2-core development VM that is 0.4-2.3 GB/s against
// ~12 GB/s for memory already touched, which made fresh per-transfer buffers
// the data plane's largest CPU cost. Rounds move same-size messages again and
// again, so buffers that are done (sent and acknowledged, or received and
// consumed) come back here and are handed out again, up to a byte budget.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace longhaul::wan_transport {

// ZeroMQ's CURVE allocates three message-sized blocks per message on each side
// (plaintext, box, message). With glibc's dynamic thresholds a freed block of a
// MiB or two at the top of the heap is soon given back to the kernel, and the
// next message faults in fresh, zeroed pages: in steady state the receiver then
// spends 5-10% of its CPU clearing pages. The first endpoint of a process sets
// fixed thresholds instead (blocks up to 8 MiB come from the heap; up to 128 MiB
// of free heap is kept), process-wide, once.
void KeepMessageMemoryMapped();

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> Create(size_t max_cached_bytes);

  // A buffer of exactly `n` bytes; its contents are unspecified.
  std::vector<std::byte> Take(size_t n);
  // Returns a buffer for reuse (dropped when the budget is full or it is small).
  void Give(std::vector<std::byte>&& buffer);
  // Wraps `buffer` so that the last owner's release gives it back to the pool.
  std::shared_ptr<const std::vector<std::byte>> Share(std::vector<std::byte>&& buffer);

  size_t cached_bytes() const;
  static constexpr size_t kMinPooledBytes = size_t{256} << 10;  // malloc serves smaller ones well

 private:
  explicit BufferPool(size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}

  mutable std::mutex mu_;
  std::multimap<size_t, std::vector<std::byte>> free_;  // by capacity
  size_t cached_ = 0;
  const size_t max_cached_;
};

}  // namespace longhaul::wan_transport
