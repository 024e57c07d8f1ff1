#include "cpu_floor.h"

#include <sodium.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace longhaul::bench {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

ProcessUsage UsageNow() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](timeval t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return {secs(u.ru_utime) + secs(u.ru_stime), u.ru_minflt + u.ru_majflt};
}

double FloorCpuSecondsPerGb(bool encryption, size_t message_bytes, size_t sample_bytes, int reps) {
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
  message_bytes = std::max<size_t>(1, std::min(message_bytes, sample_bytes));
  const size_t messages = std::max<size_t>(1, sample_bytes / message_bytes);
  // Sender's data and receiver's destination, as big as the sample: the
  // memcpy per side streams through memory as the transport's buffers do.
  std::vector<unsigned char> src(messages * message_bytes), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<unsigned char> out(message_bytes), box(message_bytes + crypto_box_MACBYTES), in(message_bytes);
  unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES], key[crypto_box_BEFORENMBYTES];
  unsigned char nonce[crypto_box_NONCEBYTES] = {};
  crypto_box_keypair(pk, sk);
  if (crypto_box_beforenm(key, pk, sk) != 0) throw std::runtime_error("crypto_box_beforenm failed");
  double best = 1e300;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const double t0 = ThreadCpuSeconds();
    for (size_t m = 0; m < messages; ++m) {
      const size_t off = m * message_bytes;
      if (!encryption) {
        std::memcpy(out.data(), src.data() + off, message_bytes);  // sender
        std::memcpy(dst.data() + off, out.data(), message_bytes);  // receiver
        continue;
      }
      std::memcpy(out.data(), src.data() + off, message_bytes);
      nonce[0] = static_cast<unsigned char>(m);
      crypto_box_easy_afternm(box.data(), out.data(), message_bytes, nonce, key);
      if (crypto_box_open_easy_afternm(in.data(), box.data(), box.size(), nonce, key) != 0) {
        throw std::runtime_error("crypto_box_open_easy_afternm rejected its own message");
      }
      std::memcpy(dst.data() + off, in.data(), message_bytes);
    }
    best = std::min(best, ThreadCpuSeconds() - t0);
  }
  if (std::memcmp(src.data(), dst.data(), src.size()) != 0) throw std::runtime_error("floor copy corrupted its bytes");
  return best / (static_cast<double>(src.size()) / 1e9);
}

}  // namespace longhaul::bench
