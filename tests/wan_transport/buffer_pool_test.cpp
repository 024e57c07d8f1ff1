// BufferPool: transfer buffers handed out again instead of freshly faulted.
#include <catch2/catch.hpp>

#include "buffer_pool.h"

using namespace longhaul::wan_transport;

TEST_CASE("the pool hands a given-back buffer out again, sized exactly, within its budget") {
  auto pool = BufferPool::Create(size_t{4} << 20);
  std::vector<std::byte> a = pool->Take(size_t{1} << 20);
  CHECK(a.size() == size_t{1} << 20);
  const std::byte* where = a.data();
  pool->Give(std::move(a));
  CHECK(pool->cached_bytes() >= size_t{1} << 20);
  // A smaller request that still fills over half of it reuses the same memory.
  std::vector<std::byte> b = pool->Take(size_t{700} << 10);
  CHECK(b.size() == size_t{700} << 10);
  CHECK(b.data() == where);
  CHECK(pool->cached_bytes() == 0);
  // Far smaller requests get their own buffer rather than waste a big one.
  pool->Give(std::move(b));
  std::vector<std::byte> c = pool->Take(size_t{300} << 10);
  CHECK(c.data() != where);
  // Over budget and small buffers are not kept.
  pool->Give(std::vector<std::byte>(size_t{8} << 20));
  pool->Give(std::vector<std::byte>(1024));
  CHECK(pool->cached_bytes() == size_t{1} << 20);
}

TEST_CASE("a shared buffer returns to the pool when its last owner lets go") {
  auto pool = BufferPool::Create(size_t{4} << 20);
  auto shared = pool->Share(pool->Take(size_t{1} << 20));
  auto second_owner = shared;
  shared.reset();
  CHECK(pool->cached_bytes() == 0);
  second_owner.reset();
  CHECK(pool->cached_bytes() == size_t{1} << 20);
  // A buffer that outlives its pool is simply freed.
  auto orphan = pool->Share(pool->Take(size_t{1} << 20));
  pool.reset();
  orphan.reset();
}
