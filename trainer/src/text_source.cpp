// The text DataSource: a file split by byte ranges (see data.h).
#include <fstream>
#include <system_error>

#include "data_sources.h"
#include <filesystem>

namespace longhaul::trainer {
namespace {

class TextSource final : public DataSource {
 public:
  TextSource(std::shared_ptr<const std::vector<uint8_t>> bytes, size_t lo, size_t hi,
             size_t val_lo)
      : bytes_(std::move(bytes)), lo_(lo), hi_(hi), val_lo_(val_lo), cursor_(lo + 1) {}

  Batch NextTrain(int batch_size, int context) override {
    Batch batch{batch_size, context, {}, {}};
    for (int b = 0; b < batch_size; ++b) {
      Append(batch, lo_, cursor_, context);
      if (++cursor_ >= hi_) cursor_ = lo_ + 1;
    }
    return batch;
  }

  Batch Validation(int batch_size, int context, int index) override {
    Batch batch{batch_size, context, {}, {}};
    const size_t n = bytes_->size() - val_lo_ - 1;  // positions val_lo+1 .. size-1
    for (int b = 0; b < batch_size; ++b) {
      const size_t k = (static_cast<size_t>(index) * batch_size + b) % n;
      Append(batch, val_lo_, val_lo_ + 1 + k, context);
    }
    return batch;
  }

  double LossFloor() const override { return 0.0; }

 private:
  // Example predicting byte `pos` from the preceding bytes in [range_lo, pos).
  void Append(Batch& batch, size_t range_lo, size_t pos, int context) const {
    for (int c = context; c >= 1; --c) {
      const bool inside = pos >= range_lo + static_cast<size_t>(c);
      batch.inputs.push_back(inside ? (*bytes_)[pos - c] : 0);
    }
    batch.targets.push_back((*bytes_)[pos]);
  }

  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  size_t lo_, hi_, val_lo_;
  size_t cursor_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> MakeTextSource(const DataOptions& o, uint32_t region,
                                                   uint32_t region_count, uint32_t worker,
                                                   uint32_t workers) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.text_path, ec))
    return NotFound("text data file '" + o.text_path + "' does not exist or is not a regular file");
  std::ifstream in(o.text_path, std::ios::binary);
  if (!in) return NotFound("text data file '" + o.text_path + "' cannot be opened");
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      (std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t size = bytes->size();
  const size_t val = static_cast<size_t>(static_cast<double>(size) * o.validation_fraction);
  const size_t train = size - val;
  const size_t shards = static_cast<size_t>(region_count) * workers;
  if (val < 2 || train / shards < 2)
    return InvalidArgument("text data file '" + o.text_path + "' has " + std::to_string(size) +
                           " bytes: too small for a validation tail of " +
                           std::to_string(o.validation_fraction) + " and " +
                           std::to_string(shards) + " training shards of >= 2 bytes");
  // Region ranges first, then worker shards inside them, so a region's data does not
  // depend on how many workers another region runs.
  const size_t r_lo = train * region / region_count, r_hi = train * (region + 1) / region_count;
  const size_t w_lo = r_lo + (r_hi - r_lo) * worker / workers;
  const size_t w_hi = r_lo + (r_hi - r_lo) * (worker + 1) / workers;
  if (w_hi - w_lo < 2)
    return InvalidArgument("text data file '" + o.text_path + "': worker shard of " +
                           std::to_string(w_hi - w_lo) + " bytes is too small");
  return std::unique_ptr<DataSource>(new TextSource(std::move(bytes), w_lo, w_hi, train));
}

}  // namespace longhaul::trainer
