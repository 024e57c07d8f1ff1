// Gloo backend of IntraRegionGroup: FileStore rendezvous, TCP device, ring collectives.
// gloo reports failures by throwing; every call is wrapped so nothing escapes.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <exception>
#include <string>
#include <system_error>

#include "longhaul/trainer/intra_region.h"

namespace longhaul::trainer {
namespace {

// gloo throws IoException for socket errors and timeouts, EnforceNotMet for bugs.
template <typename F>
Status GlooCall(const char* what, F&& f) {
  try {
    f();
    return Status::Ok();
  } catch (const gloo::IoException& e) {
    const std::string msg = e.what();
    if (msg.find("imed out") != std::string::npos || msg.find("imeout") != std::string::npos)
      return DeadlineExceeded(std::string("gloo ") + what + ": " + msg);
    return Unavailable(std::string("gloo ") + what + ": " + msg);
  } catch (const std::exception& e) {
    return Unavailable(std::string("gloo ") + what + ": " + e.what());
  }
}

// Presents a RendezvousStore to gloo, which expects exceptions on failure.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<RendezvousStore> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_->Set(key, data));
  }
  std::vector<char> get(const std::string& key) override {
    auto r = store_->Get(key, timeout_);
    Check(r.status());
    return std::move(r).value();
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const std::string& key : keys) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      Check(store_->Get(key, std::max(left, std::chrono::milliseconds(0))).status());
    }
  }

 private:
  static void Check(const Status& st) {
    if (!st.ok()) throw gloo::IoException("rendezvous store: " + st.ToString());
  }
  std::shared_ptr<RendezvousStore> store_;
  std::chrono::milliseconds timeout_;
};

class GlooGroup final : public IntraRegionGroup {
 public:
  explicit GlooGroup(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  Status AllReduceMean(std::span<float> data) override {
    if (data.empty()) return Status::Ok();
    LONGHAUL_RETURN_IF_ERROR(GlooCall("all-reduce", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(data.data(), data.size());
      void (*fn)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
      opts.setReduceFunction(fn);
      opts.setTag(kTagAllReduce);
      gloo::allreduce(opts);
    }));
    const float inv = 1.0f / static_cast<float>(size());
    for (float& x : data) x *= inv;
    return Status::Ok();
  }

  Status AllGather(std::span<const float> mine, std::span<float> all) override {
    if (all.size() != mine.size() * static_cast<size_t>(size()))
      return InvalidArgument("all-gather: output has " + std::to_string(all.size()) +
                             " floats, want " + std::to_string(mine.size()) + " x " +
                             std::to_string(size()));
    if (mine.empty()) return Status::Ok();
    return GlooCall("all-gather", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(const_cast<float*>(mine.data()), mine.size());  // gloo only reads it
      opts.setOutput(all.data(), all.size());
      opts.setTag(kTagAllGather);
      gloo::allgather(opts);
    });
  }

  Status Broadcast(std::span<float> data, int root) override {
    if (root < 0 || root >= size())
      return InvalidArgument("broadcast: root " + std::to_string(root) + " not in a group of " +
                             std::to_string(size()));
    if (data.empty()) return Status::Ok();
    return GlooCall("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(data.data(), data.size());
      opts.setRoot(root);
      opts.setTag(kTagBroadcast);
      gloo::broadcast(opts);
    });
  }

  Status Barrier() override {
    return GlooCall("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(kTagBarrier);
      gloo::barrier(opts);
    });
  }

 private:
  static constexpr uint32_t kTagAllReduce = 1, kTagAllGather = 2, kTagBroadcast = 3, kTagBarrier = 4;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace

Status GlooGroupOptions::Validate() const {
  if (size < 1) return InvalidArgument("gloo group: 'size' must be >= 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    return InvalidArgument("gloo group: 'rank' must be in [0, " + std::to_string(size) + "), got " +
                           std::to_string(rank));
  if (size > 1 && !store && store_dir.empty())
    return InvalidArgument("gloo group: neither 'store' nor 'store_dir' is set");
  if (size > 1 && prefix.empty()) return InvalidArgument("gloo group: 'prefix' is empty (must be unique per rendezvous)");
  if (size > 1 && host.empty()) return InvalidArgument("gloo group: 'host' is empty");
  if (timeout.count() <= 0)
    return InvalidArgument("gloo group: 'timeout' must be > 0 ms, got " + std::to_string(timeout.count()));
  return Status::Ok();
}

Result<std::unique_ptr<IntraRegionGroup>> MakeGlooGroup(const GlooGroupOptions& options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  if (options.size == 1) return MakeSingleRankGroup();
  std::error_code ec;
  if (!options.store) std::filesystem::create_directories(options.store_dir, ec);
  if (ec)
    return Unavailable("gloo group: cannot create store dir '" + options.store_dir.string() +
                       "': " + ec.message());
  std::shared_ptr<gloo::rendezvous::Context> context;
  Status st = GlooCall("rendezvous", [&] {
    gloo::transport::tcp::attr attr(options.host.c_str());
    auto device = gloo::transport::tcp::CreateDevice(attr);
    std::unique_ptr<gloo::rendezvous::Store> base;
    if (options.store)
      base = std::make_unique<StoreAdapter>(options.store, options.timeout);
    else
      base = std::make_unique<gloo::rendezvous::FileStore>(options.store_dir.string());
    gloo::rendezvous::PrefixStore store(options.prefix, *base);
    context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(store, device);
  });
  if (!st.ok()) return st.WithContext("rank " + std::to_string(options.rank) + " of " + std::to_string(options.size));
  return std::unique_ptr<IntraRegionGroup>(new GlooGroup(std::move(context)));
}

}  // namespace longhaul::trainer
