// safetensors writer (atomic) and validating reader.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "longhaul/trainer/checkpoint.h"

namespace longhaul::trainer {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the Python reader's limit

Status WriteAll(int fd, const void* data, size_t n, const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Unavailable("writing '" + path.string() + "': " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status FsyncDir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Unavailable("opening directory '" + dir.string() + "': " + std::strerror(errno));
  const int r = ::fsync(fd);
  ::close(fd);
  if (r != 0) return Unavailable("fsync of directory '" + dir.string() + "': " + std::strerror(errno));
  return Status::Ok();
}

size_t Numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

const LoadedTensor* LoadedSafetensors::Find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Status WriteSafetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return InvalidArgument("safetensors: invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) return InvalidArgument("safetensors: duplicate tensor name '" + t.name + "'");
    for (int64_t d : t.shape)
      if (d < 0) return InvalidArgument("safetensors: tensor '" + t.name + "' has a negative dimension");
    if (Numel(t.shape) != t.data.size())
      return InvalidArgument("safetensors: tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                             " floats but its shape holds " + std::to_string(Numel(t.shape)));
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("creating '" + tmp.string() + "': " + std::strerror(errno));
  Status st = WriteAll(fd, len, sizeof(len), tmp);
  if (st.ok()) st = WriteAll(fd, text.data(), text.size(), tmp);
  static_assert(std::numeric_limits<float>::is_iec559, "safetensors F32 is IEEE-754");
  for (const NamedTensor& t : tensors)  // little-endian host (x86-64, aarch64)
    if (st.ok()) st = WriteAll(fd, t.data.data(), t.data.size() * sizeof(float), tmp);
  if (st.ok() && ::fsync(fd) != 0) st = Unavailable("fsync of '" + tmp.string() + "': " + std::strerror(errno));
  ::close(fd);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = Unavailable("renaming '" + tmp.string() + "' to '" + path.string() + "': " + std::strerror(errno));
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return FsyncDir(path.parent_path());
}

Result<LoadedSafetensors> ReadSafetensors(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("safetensors file '" + path.string() + "' not found");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return Unavailable("size of '" + path.string() + "': " + ec.message());
  auto corrupt = [&](const std::string& why) { return DataLoss("safetensors file '" + path.string() + "': " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("cannot open '" + path.string() + "'");
  uint8_t len[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len), 8)) return corrupt("shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (header_len > kMaxHeaderBytes) return corrupt("header length " + std::to_string(header_len) + " exceeds the 100 MiB limit");
  if (header_len > file_size - 8)
    return corrupt("header length " + std::to_string(header_len) + " runs past the end of the " +
                   std::to_string(file_size) + "-byte file (truncated?)");
  std::string text(header_len, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_len))) return corrupt("cannot read the header");
  nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return corrupt("header is not a JSON object");

  LoadedSafetensors out;
  const uint64_t data_size = file_size - 8 - header_len;
  struct Entry { uint64_t begin, end; LoadedTensor t; };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) return corrupt("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return corrupt("metadata value of '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string& name = it.key();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      return corrupt("tensor '" + name + "' lacks dtype, shape or data_offsets");
    if (!v["dtype"].is_string() || v["dtype"] != "F32")
      return corrupt("tensor '" + name + "' has dtype " + v["dtype"].dump() + ", only F32 is supported");
    const auto& shape = v["shape"];
    const auto& offs = v["data_offsets"];
    if (!shape.is_array() || !offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
        !offs[1].is_number_unsigned())
      return corrupt("tensor '" + name + "' has a malformed shape or data_offsets");
    Entry e{offs[0].get<uint64_t>(), offs[1].get<uint64_t>(), {name, {}, {}}};
    uint64_t numel = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) return corrupt("tensor '" + name + "' has a non-integer dimension");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > (data_size / 4 + 1) / dim) return corrupt("tensor '" + name + "' shape is too large for the file");
      numel *= dim;
      e.t.shape.push_back(static_cast<int64_t>(dim));
    }
    if (e.begin > e.end || e.end > data_size)
      return corrupt("tensor '" + name + "' data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     ") outside the " + std::to_string(data_size) + "-byte data section");
    if (e.end - e.begin != numel * 4)
      return corrupt("tensor '" + name + "' spans " + std::to_string(e.end - e.begin) + " bytes, its shape needs " +
                     std::to_string(numel * 4));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t expect = 0;
  for (const Entry& e : entries) {
    if (e.begin != expect) return corrupt("tensor '" + e.t.name + "' data does not start where the previous ends (gap or overlap)");
    expect = e.end;
  }
  if (expect != data_size)
    return corrupt("data section is " + std::to_string(data_size) + " bytes but the tensors cover " + std::to_string(expect));
  for (Entry& e : entries) {
    e.t.data.resize((e.end - e.begin) / 4);
    if (!in.read(reinterpret_cast<char*>(e.t.data.data()), static_cast<std::streamsize>(e.end - e.begin)))
      return corrupt("cannot read the data of tensor '" + e.t.name + "'");
    out.tensors.push_back(std::move(e.t));
  }
  return out;
}

}  // namespace longhaul::trainer
