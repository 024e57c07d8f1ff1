// In-memory RendezvousStore: a map under a mutex, Get waits on a condition variable.
#include <condition_variable>
#include <map>
#include <mutex>

#include "longhaul/trainer/intra_region.h"

namespace longhaul::trainer {

RendezvousStore::~RendezvousStore() = default;

namespace {

class InProcessStore final : public RendezvousStore {
 public:
  Status Set(const std::string& key, const std::vector<char>& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      values_[key] = value;
    }
    cv_.notify_all();
    return Status::Ok();
  }
  Result<std::vector<char>> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      return DeadlineExceeded("rendezvous key '" + key + "' not set within " +
                              std::to_string(timeout.count()) + " ms");
    return values_.at(key);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace

std::shared_ptr<RendezvousStore> MakeInProcessRendezvousStore() { return std::make_shared<InProcessStore>(); }

}  // namespace longhaul::trainer
