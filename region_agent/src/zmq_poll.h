// zmq::poll that treats EINTR (a signal, e.g. SIGTERM asking us to stop) as
// "nothing ready" instead of throwing, so the caller's loop can see its stop flag.
#pragma once

#include <cerrno>
#include <chrono>

#include <zmq.hpp>

namespace longhaul::region_agent {

inline int PollOrInterrupted(zmq::pollitem_t* items, size_t n, std::chrono::milliseconds timeout) {
  try {
    return zmq::poll(items, n, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return 0;
    throw;
  }
}

}  // namespace longhaul::region_agent
