// ExchangeThread: one thread, kept for a RegionReplica's life, that runs its
// cross-region exchanges one after another (Streaming DiLoCo overlaps them
// with inner steps). std::async would start a thread per exchange, and with it
// every thread_local scratch buffer of the codecs and collectives: memory new
// to the process, faulted in page by page, every round.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "longhaul/common/status.h"

namespace longhaul::worker {

class ExchangeThread {
 public:
  ExchangeThread() : thread_([this] { Loop(); }) {}
  // Runs what is queued, then joins: an exchange is never dropped (each is
  // bounded by its own deadline).
  ~ExchangeThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  ExchangeThread(const ExchangeThread&) = delete;
  ExchangeThread& operator=(const ExchangeThread&) = delete;

  std::future<Status> Run(std::function<Status()> job) {
    std::packaged_task<Status()> task(std::move(job));
    std::future<Status> done = task.get_future();
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return done;
  }

 private:
  void Loop() {
    for (;;) {
      std::packaged_task<Status()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left to run
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<Status()>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace longhaul::worker
