// Fuzz target: the safetensors reader (trainer/src/safetensors.cpp ReadSafetensors)
// and the checkpoint loader behind it (round_checkpoint.cpp LoadTensors), i.e. what
// a worker does with a checkpoint file it is told to restore from.
//
// Input: the whole file. It is written to one file in this process's temporary
// folder (fuzz_support.h), overwritten by every input; nothing else is written.
// Properties: a bad file is a Status (kDataLoss), never a crash; an accepted file's
// tensors hold exactly product(shape) floats and together cover the data section;
// LoadTensors either copies matching tensors or refuses.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "fuzz_support.h"
#include "longhaul/trainer/checkpoint.h"

namespace {

using namespace longhaul;

constexpr size_t kMaxInput = 1 << 20;

const std::filesystem::path& InputFile() {
  static const std::filesystem::path file = fuzz::ProcessTempDir::Get() / "input.safetensors";
  return file;
}

bool WriteInput(const uint8_t* data, size_t size) {
  const int fd = ::open(InputFile().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  ::close(fd);
  return done == size;
}

// The layout a model of two tensors would ask for (seeds in corpus/safetensors use
// these names and shapes): "w" [2, 3] at 0 and "b" [3] at 6 of 9 floats.
const std::vector<trainer::TensorView>& Views() {
  static const std::vector<trainer::TensorView> views = {{"w", {2, 3}, 0, 6}, {"b", {3}, 6, 3}};
  return views;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SilenceLogs();
  (void)InputFile();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  if (!WriteInput(data, size)) __builtin_trap();  // the temp folder is gone or full: not the input's fault
  auto loaded = trainer::ReadSafetensors(InputFile());
  if (!loaded.ok()) return 0;

  // The header length prefix and the JSON header come before the data section.
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(data[i]) << (8 * i);
  uint64_t covered = 0;
  for (const trainer::LoadedTensor& t : loaded->tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    LONGHAUL_FUZZ_CHECK(numel == t.data.size());
    LONGHAUL_FUZZ_CHECK(loaded->Find(t.name) != nullptr);
    covered += t.data.size() * sizeof(float);
  }
  LONGHAUL_FUZZ_CHECK(covered == size - 8 - header_len);

  for (const std::string prefix : {"", "params."}) {
    std::vector<float> flat(9, 0.0f);
    (void)trainer::LoadTensors(*loaded, Views(), flat, prefix);
  }
  return 0;
}
