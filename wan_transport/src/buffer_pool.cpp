#include "buffer_pool.h"

#include <malloc.h>

#include <mutex>

#include "longhaul/wan_transport/chunking.h"

namespace longhaul::wan_transport {

void KeepMessageMemoryMapped() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 8 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
  });
}

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

std::vector<std::byte> BufferPool::Take(size_t n) {
  if (n >= kMinPooledBytes) {
    std::lock_guard lock(mu_);
    // The smallest cached buffer that fits, unless it would waste over half of itself.
    auto it = free_.lower_bound(n);
    if (it != free_.end() && it->first <= 2 * n) {
      std::vector<std::byte> v = std::move(it->second);
      cached_ -= it->first;
      free_.erase(it);
      v.resize(n);  // within capacity: no allocation, pages already touched
      return v;
    }
  }
  return AllocateTransferBuffer(n);
}

void BufferPool::Give(std::vector<std::byte>&& buffer) {
  const size_t cap = buffer.capacity();
  if (cap < kMinPooledBytes) return;
  std::lock_guard lock(mu_);
  if (cached_ + cap > max_cached_) return;  // freed as it goes out of scope
  cached_ += cap;
  free_.emplace(cap, std::move(buffer));
}

std::shared_ptr<const std::vector<std::byte>> BufferPool::Share(std::vector<std::byte>&& buffer) {
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<const std::vector<std::byte>>(
      new std::vector<std::byte>(std::move(buffer)), [pool](const std::vector<std::byte>* v) {
        auto* owned = const_cast<std::vector<std::byte>*>(v);  // created non-const just above
        if (auto p = pool.lock()) p->Give(std::move(*owned));
        delete owned;
      });
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_;
}

}  // namespace longhaul::wan_transport
