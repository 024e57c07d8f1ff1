// ExchangeThread: the replica's exchanges run one after another on one thread
// kept for its life (so thread_local scratch survives from round to round).
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "exchange_thread.h"

using longhaul::Status;
using longhaul::worker::ExchangeThread;

TEST_CASE("ExchangeThread runs every job in order on one thread and returns each one's status", "[exchange_thread]") {
  ExchangeThread exchange;
  std::vector<int> order;  // written by the exchange thread only; read after every future is ready
  std::set<std::thread::id> threads;
  std::vector<std::future<Status>> done;
  for (int i = 0; i < 20; ++i) {
    done.push_back(exchange.Run([&, i] {
      order.push_back(i);
      threads.insert(std::this_thread::get_id());
      return i == 7 ? longhaul::Unavailable("job 7") : Status::Ok();
    }));
  }
  for (int i = 0; i < 20; ++i) {
    Status s = done[i].get();
    CHECK(s.ok() == (i != 7));
  }
  REQUIRE(order.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(order[i] == i);
  REQUIRE(threads.size() == 1);
  CHECK(*threads.begin() != std::this_thread::get_id());
}

TEST_CASE("ExchangeThread keeps its thread_local state from one job to the next", "[exchange_thread]") {
  ExchangeThread exchange;
  auto bump = [] {
    thread_local int calls = 0;
    return ++calls == 1 ? Status::Ok() : longhaul::Internal(std::to_string(calls));
  };
  CHECK(exchange.Run(bump).get().ok());
  Status second = exchange.Run(bump).get();  // std::async would have started a fresh thread: calls == 1 again
  CHECK(second.message() == "2");
}

TEST_CASE("ExchangeThread's destructor runs the jobs still queued before it returns", "[exchange_thread]") {
  // The first job holds the thread until just before the destructor, so the
  // others are still queued when it starts; none may be dropped.
  std::atomic<int> ran{0};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::vector<std::future<Status>> done;
  {
    ExchangeThread exchange;
    done.push_back(exchange.Run([&] {
      gate.wait();
      ++ran;
      return Status::Ok();
    }));
    for (int i = 0; i < 50; ++i) done.push_back(exchange.Run([&] {
      ++ran;
      return Status::Ok();
    }));
    release.set_value();
  }
  CHECK(ran.load() == 51);
  for (auto& d : done) CHECK(d.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
}
