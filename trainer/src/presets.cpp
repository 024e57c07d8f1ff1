// Model presets and ModelConfig validation.
#include <string>

#include "longhaul/trainer/model.h"

namespace longhaul::trainer {

Status ModelConfig::Validate() const {
  auto bad = [](const char* field, int value, const char* rule) {
    return InvalidArgument("model config: field '" + std::string(field) + "' " + rule +
                           ", got " + std::to_string(value));
  };
  if (context < 1 || context > 4096) return bad("context", context, "must be in [1, 4096]");
  if (embed_dim < 1 || embed_dim > 65536) return bad("embed_dim", embed_dim, "must be in [1, 65536]");
  if (hidden_dim < 1 || hidden_dim > 65536) return bad("hidden_dim", hidden_dim, "must be in [1, 65536]");
  if (hidden_layers < 1 || hidden_layers > 64) return bad("hidden_layers", hidden_layers, "must be in [1, 64]");
  if (static_cast<int64_t>(context) * embed_dim > (1 << 20)) {
    return InvalidArgument("model config: context * embed_dim must be <= 1048576, got " +
                           std::to_string(static_cast<int64_t>(context) * embed_dim));
  }
  return Status::Ok();
}

std::vector<std::string> ModelPresetNames() { return {"tiny", "small"}; }

Result<ModelConfig> ModelPreset(std::string_view name) {
  ModelConfig c;
  c.preset = std::string(name);
  if (name == "tiny") {
    c.context = 8;
    c.embed_dim = 16;
    c.hidden_dim = 64;
    c.hidden_layers = 1;
    return c;
  }
  if (name == "small") {
    c.context = 16;
    c.embed_dim = 48;
    c.hidden_dim = 768;
    c.hidden_layers = 3;
    return c;
  }
  std::string valid;
  for (const auto& n : ModelPresetNames()) valid += (valid.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown model preset '" + std::string(name) + "' (valid: " + valid + ")");
}

}  // namespace longhaul::trainer
