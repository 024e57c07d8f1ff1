// Batch: one minibatch of next-byte prediction examples.
//
// Example i predicts targets[i] from the `context` bytes
// inputs[i*context .. (i+1)*context), oldest first. Plain bytes keep batches cheap to
// build, copy and hash; the model embeds them itself.
#pragma once

#include <cstdint>
#include <vector>

namespace longhaul::trainer {

struct Batch {
  int batch_size = 0;
  int context = 0;
  std::vector<uint8_t> inputs;   // batch_size * context bytes
  std::vector<uint8_t> targets;  // batch_size bytes
};

}  // namespace longhaul::trainer
