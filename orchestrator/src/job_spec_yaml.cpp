// YAML -> JobSpec. A FieldReader walks one YAML map, converts each known key
// with a type check, and at the end reports any key it did not consume, so
// unknown fields, wrong types and missing required fields all name the field
// and its line. yaml-cpp keeps the first of two equal keys and Load() the first
// of several documents, silently; both are errors here. Sizes: job_spec_limits.h.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "job_spec_limits.h"
#include "longhaul/proto/job_defaults.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/orchestrator/job_spec.h"
#include "worker_spec_rules.h"

namespace longhaul::orchestrator {
namespace {

using spec_limits::ShortQuote;

int LineOf(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

// yaml-cpp's own messages are short fixed texts; kept printable and bounded anyway.
std::string Clip(const std::string& msg) {
  const std::string q = ShortQuote(msg);
  return q.size() == msg.size() + 2 ? msg : q;
}

class FieldReader {
 public:
  FieldReader(const YAML::Node& map, std::string prefix, std::string_view source)
      : map_(map), prefix_(std::move(prefix)), source_(source) {}

  // A mapping whose keys are all different. Call before reading any field.
  Status Check() const {
    if (!map_.IsMap())
      return Error(map_, (prefix_.empty() ? std::string("the job spec") : "field '" + Name("") + "'") +
                             " must be a mapping of fields");
    std::map<std::string, int> first_line;
    for (const auto& kv : map_) {
      if (!kv.first.IsScalar()) continue;  // RejectUnknown names it
      const auto [it, fresh] = first_line.emplace(kv.first.Scalar(), LineOf(kv.first));
      if (!fresh)
        return Error(kv.first, "field " + ShortQuote(Name(kv.first.Scalar())) + " is given twice, on lines " +
                                   std::to_string(it->second) + " and " + std::to_string(LineOf(kv.first)));
    }
    return Status::Ok();
  }
  // The file gives `key` a value (not left out, not null).
  bool Given(const char* key) const {
    const YAML::Node n = map_[key];
    return n && !n.IsNull();
  }
  Status U32(const char* key, uint32_t* out, bool required = false) {
    uint64_t v = 0;
    bool present = false;
    LONGHAUL_RETURN_IF_ERROR(UInt(key, &v, required, &present));
    if (!present) return Status::Ok();
    if (v > 0xffffffffULL)
      return Error(map_[key], "field '" + Name(key) + "' must be at most 4294967295, got " + std::to_string(v));
    *out = static_cast<uint32_t>(v);
    return Status::Ok();
  }
  Status U64(const char* key, uint64_t* out, bool required = false) {
    bool present = false;
    return UInt(key, out, required, &present);
  }
  Status F64(const char* key, double* out) {
    std::optional<YAML::Node> found;
    LONGHAUL_RETURN_IF_ERROR(Scalar(key, false, &found));
    if (!found) return Status::Ok();
    const YAML::Node& n = *found;
    const std::string s = n.Scalar();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || v != v)
      return Error(n, "field '" + Name(key) + "' must be a number, got " + ShortQuote(s));
    *out = v;
    return Status::Ok();
  }
  // A string within its limit in job_spec_limits.h (every string field has one).
  Status Str(const char* key, std::string* out, bool required = false) {
    std::optional<YAML::Node> found;
    LONGHAUL_RETURN_IF_ERROR(Scalar(key, required, &found));
    if (!found) return Status::Ok();
    const spec_limits::TextLimit* limit = spec_limits::FindScalarLimit(Name(key));
    if (!limit) return Internal("field '" + Name(key) + "' has no length limit in job_spec_limits.h");
    const Status ok = spec_limits::CheckText(*limit, found->Scalar());
    if (!ok.ok()) return Error(*found, ok.message());
    *out = found->Scalar();
    return Status::Ok();
  }
  Status Bool(const char* key, bool* out) {
    std::optional<YAML::Node> found;
    LONGHAUL_RETURN_IF_ERROR(Scalar(key, false, &found));
    if (!found) return Status::Ok();
    const YAML::Node& n = *found;
    const std::string s = n.Scalar();
    if (s == "true" || s == "yes" || s == "on") *out = true;
    else if (s == "false" || s == "no" || s == "off") *out = false;
    else
      return Error(n, "field '" + Name(key) + "' must be true or false, got " + ShortQuote(s));
    return Status::Ok();
  }
  // A list of at most `max_items` different non-empty names within `limit`.
  Status StrList(const char* key, const spec_limits::TextLimit& limit, size_t max_items,
                 google::protobuf::RepeatedPtrField<std::string>* out) {
    used_.insert(key);
    YAML::Node n = map_[key];
    if (!n || n.IsNull()) return Status::Ok();
    if (!n.IsSequence()) return Error(n, "field '" + Name(key) + "' must be a list of names");
    if (n.size() > max_items)
      return Error(n, "field '" + Name(key) + "' must have at most " + std::to_string(max_items) + " names, got " +
                          std::to_string(n.size()));
    out->Clear();
    std::map<std::string, int> seen;
    for (const auto& item : n) {
      if (!item.IsScalar() || item.Scalar().empty())
        return Error(item, "field '" + Name(key) + "' must contain only non-empty names");
      const Status ok = spec_limits::CheckText(limit.field, item.Scalar(), limit.max_bytes);
      if (!ok.ok()) return Error(item, ok.message());
      const auto [it, fresh] = seen.emplace(item.Scalar(), LineOf(item));
      if (!fresh)
        return Error(item, "field '" + Name(key) + "' lists " + ShortQuote(item.Scalar()) + " twice, on lines " +
                               std::to_string(it->second) + " and " + std::to_string(LineOf(item)));
      *out->Add() = item.Scalar();
    }
    return Status::Ok();
  }
  // A nested mapping; returns a null node when absent.
  Status Sub(const char* key, std::optional<YAML::Node>* out) {
    used_.insert(key);
    YAML::Node n = map_[key];
    if (!n || n.IsNull()) return Status::Ok();
    if (!n.IsMap()) return Error(n, "field '" + Name(key) + "' must be a mapping of fields");
    out->emplace(n);
    return Status::Ok();
  }
  // A field of any shape (checked by the caller); absent when not written, even as null.
  void Any(const char* key, std::optional<YAML::Node>* out) {
    used_.insert(key);
    YAML::Node n = map_[key];
    if (n) out->emplace(n);
  }
  Status RejectUnknown() const {
    for (const auto& kv : map_) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (!used_.count(key)) {
        std::string known;
        for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
        return Error(kv.first, "unknown field " + ShortQuote(Name(key)) + " (known here: " + known + ")");
      }
    }
    return Status::Ok();
  }
  std::string Name(const std::string& key) const { return prefix_.empty() ? key : prefix_ + (key.empty() ? "" : "." + key); }
  Status Error(const YAML::Node& at, const std::string& what) const {
    return InvalidArgument(std::string(source_) + " line " + std::to_string(LineOf(at)) + ": " + what);
  }

 private:
  // Default-constructed YAML::Nodes are defined (null) and assignment aliases
  // rather than rebinds, so absence is carried by std::optional.
  Status Scalar(const char* key, bool required, std::optional<YAML::Node>* out) {
    used_.insert(key);
    YAML::Node n = map_[key];
    if (!n || n.IsNull()) {
      if (required) return Error(map_, "missing required field '" + Name(key) + "'");
      return Status::Ok();
    }
    if (!n.IsScalar()) return Error(n, "field '" + Name(key) + "' must be a single value, not a list or mapping");
    out->emplace(n);
    return Status::Ok();
  }
  Status UInt(const char* key, uint64_t* out, bool required, bool* present) {
    std::optional<YAML::Node> found;
    LONGHAUL_RETURN_IF_ERROR(Scalar(key, required, &found));
    if (!found) return Status::Ok();
    const YAML::Node& n = *found;
    const std::string s = n.Scalar();
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
      return Error(n, "field '" + Name(key) + "' must be a non-negative integer, got " + ShortQuote(s));
    *out = v;
    *present = true;
    return Status::Ok();
  }

  const YAML::Node map_;  // const: yaml-cpp's non-const operator[] inserts missing keys
  std::string prefix_;
  std::string_view source_;
  std::set<std::string> used_;
};

// Reads `key` into a protobuf field through its getter/setter pair.
// Sets the field only when the file gives it: an optional field left out
// stays unset, and the defaults table fills it (a 0 written in the file is 0).
#define LH_FIELD(reader, kind, msg, key, ...)                    \
  do {                                                            \
    auto _v = (msg)->key();                                       \
    LONGHAUL_RETURN_IF_ERROR((reader).kind(#key, &_v, ##__VA_ARGS__)); \
    if ((reader).Given(#key)) (msg)->set_##key(_v);               \
  } while (0)

Status ParseData(const YAML::Node& node, std::string_view src, v1::DataSpec* data) {
  FieldReader r(node, "data", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  std::optional<YAML::Node> syn, text;
  LONGHAUL_RETURN_IF_ERROR(r.Sub("synthetic", &syn));
  LONGHAUL_RETURN_IF_ERROR(r.Sub("text_file", &text));
  LONGHAUL_RETURN_IF_ERROR(r.RejectUnknown());
  if (syn && text) return r.Error(*text, "field 'data' must have exactly one of 'synthetic' or 'text_file'");
  if (text) {
    FieldReader t(*text, "data.text_file", src);
    LONGHAUL_RETURN_IF_ERROR(t.Check());
    v1::TextFileData* d = data->mutable_text_file();
    d->set_validation_fraction(0.05);
    LH_FIELD(t, Str, d, path, true);
    LH_FIELD(t, F64, d, validation_fraction);
    return t.RejectUnknown();
  }
  if (syn) {
    FieldReader t(*syn, "data.synthetic", src);
    LONGHAUL_RETURN_IF_ERROR(t.Check());
    v1::SyntheticData* d = data->mutable_synthetic();
    LH_FIELD(t, U64, d, seed);
    LH_FIELD(t, U32, d, branching);
    LH_FIELD(t, U32, d, order);
    LH_FIELD(t, Bool, d, non_iid);
    return t.RejectUnknown();
  }
  return Status::Ok();
}

Status ParseInner(const YAML::Node& node, std::string_view src, v1::InnerOptimizer* o) {
  FieldReader r(node, "inner", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  LH_FIELD(r, Str, o, name);
  LH_FIELD(r, F64, o, lr);
  LH_FIELD(r, F64, o, weight_decay);
  LH_FIELD(r, F64, o, beta1);
  LH_FIELD(r, F64, o, beta2);
  LH_FIELD(r, U32, o, warmup_steps);
  LH_FIELD(r, U32, o, batch_size);
  LH_FIELD(r, U32, o, first_moment_sync_rounds);
  LH_FIELD(r, U32, o, second_moment_sync_rounds);
  return r.RejectUnknown();
}

Status ParseOuter(const YAML::Node& node, std::string_view src, v1::OuterOptimizer* o) {
  FieldReader r(node, "outer", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  LH_FIELD(r, Str, o, name);
  LH_FIELD(r, F64, o, lr);
  LH_FIELD(r, F64, o, momentum);
  LH_FIELD(r, U32, o, warmup_rounds);
  LH_FIELD(r, Str, o, lr_decay);
  LH_FIELD(r, F64, o, final_lr_fraction);
  LH_FIELD(r, U32, o, momentum_warmup_rounds);
  LH_FIELD(r, U32, o, momentum_restart_rounds);
  return r.RejectUnknown();
}

// `sync.adaptive.codecs`: codec names spelt as compression.codec's. A codec
// named twice is left to ValidateJobSpec, which checks specs from the wire too.
Status ParseAdaptiveCodecs(const FieldReader& r, const YAML::Node& list, v1::AdaptiveSync* a) {
  const std::string field = r.Name("codecs");
  if (!list.IsSequence())
    return r.Error(list, "field '" + field + "' must be a list of codec names such as [int8, int4]");
  if (list.size() > spec_limits::kMaxAdaptiveCodecs)
    return r.Error(list, "field '" + field + "' must have at most " + std::to_string(spec_limits::kMaxAdaptiveCodecs) +
                             " codecs, got " + std::to_string(list.size()));
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!item.IsScalar()) return r.Error(item, "field '" + at + "' must be a codec name");
    const Status text = spec_limits::CheckText(spec_limits::kAdaptiveCodec, item.Scalar());
    if (!text.ok()) return r.Error(item, text.message());
    auto codec = proto::CodecFromName(item.Scalar());
    if (!codec.ok())
      return r.Error(item, "field '" + at + "' must be one of " + sync_policies::CodecNames() + ", got " +
                               ShortQuote(item.Scalar()));
    a->add_codecs(*codec);
  }
  return Status::Ok();
}

// `sync.adaptive`: left out, re-planning is off; given, it needs a target (there
// is no default one). The bounds are checked by ValidateJobSpec.
Status ParseAdaptive(const YAML::Node& node, std::string_view src, v1::AdaptiveSync* a) {
  FieldReader r(node, "sync.adaptive", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  LH_FIELD(r, F64, a, target_utilisation);
  LH_FIELD(r, U32, a, max_inner_steps);
  LH_FIELD(r, U32, a, max_overlap_steps);
  std::optional<YAML::Node> codecs;
  r.Any("codecs", &codecs);
  LONGHAUL_RETURN_IF_ERROR(r.RejectUnknown());
  if (!r.Given("target_utilisation"))
    return r.Error(node, "missing required field 'sync.adaptive.target_utilisation'");
  if (codecs && !codecs->IsNull()) LONGHAUL_RETURN_IF_ERROR(ParseAdaptiveCodecs(r, *codecs, a));
  return Status::Ok();
}

Status ParseSync(const YAML::Node& node, std::string_view src, v1::SyncPolicy* o) {
  FieldReader r(node, "sync", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  LH_FIELD(r, Str, o, kind);
  LH_FIELD(r, U32, o, inner_steps);
  LH_FIELD(r, U32, o, fragments);
  LH_FIELD(r, U32, o, overlap_steps);
  LH_FIELD(r, F64, o, mixing_alpha);
  LH_FIELD(r, Bool, o, time_budgeted);
  std::optional<YAML::Node> adaptive;
  LONGHAUL_RETURN_IF_ERROR(r.Sub("adaptive", &adaptive));
  LONGHAUL_RETURN_IF_ERROR(r.RejectUnknown());
  if (adaptive) LONGHAUL_RETURN_IF_ERROR(ParseAdaptive(*adaptive, src, o->mutable_adaptive()));
  return Status::Ok();
}

Status ParseCompression(const YAML::Node& node, std::string_view src, v1::Compression* o) {
  FieldReader r(node, "compression", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  std::string codec(proto::CodecName(o->codec()));
  LONGHAUL_RETURN_IF_ERROR(r.Str("codec", &codec));
  auto parsed = proto::CodecFromName(codec);
  if (!parsed.ok()) return r.Error(node["codec"] ? node["codec"] : node, parsed.status().message());
  o->set_codec(*parsed);
  LH_FIELD(r, U32, o, block_size);
  LH_FIELD(r, F64, o, topk_fraction);
  return r.RejectUnknown();
}

// `worker: {command: [...], env: {...}, working_dir: ...}` runs the user's
// program; any other `worker` mapping configures the built-in trainer.
Status ParseCommandWorker(const YAML::Node& node, std::string_view src, FieldReader& r, v1::CommandWorker* c) {
  for (const char* key : {"preset", "context", "embed", "hidden", "layers"})
    if (node[key])
      return r.Error(node[key], "field 'worker." + std::string(key) +
                                    "' configures the built-in trainer and cannot be combined with 'worker.command'");
  std::optional<YAML::Node> cmd, env;
  r.Any("command", &cmd);
  r.Any("env", &env);
  std::string dir;
  LONGHAUL_RETURN_IF_ERROR(r.Str("working_dir", &dir));
  LONGHAUL_RETURN_IF_ERROR(r.RejectUnknown());
  const YAML::Node& argv = *cmd;
  if (!argv.IsSequence() || argv.size() == 0)
    return r.Error(argv, "field 'worker.command' must be a non-empty list such as [python3, train.py]");
  if (argv.size() > spec_limits::kMaxCommandArgs)
    return r.Error(argv, "field 'worker.command' must have at most " + std::to_string(spec_limits::kMaxCommandArgs) +
                             " entries, got " + std::to_string(argv.size()));
  for (size_t i = 0; i < argv.size(); ++i) {
    const YAML::Node item = argv[i];
    if (!item.IsScalar())
      return r.Error(item, "field 'worker.command[" + std::to_string(i) + "]' must be a non-empty string");
    const Status ok = worker_rules::CheckArg(i, item.Scalar());
    if (!ok.ok()) return r.Error(item, ok.message());
    c->add_argv(item.Scalar());
  }
  if (env && !env->IsNull()) {
    if (!env->IsMap()) return r.Error(*env, "field 'worker.env' must be a mapping of NAME: value");
    if (env->size() > spec_limits::kMaxEnvEntries)
      return r.Error(*env, "field 'worker.env' must have at most " + std::to_string(spec_limits::kMaxEnvEntries) +
                               " entries, got " + std::to_string(env->size()));
    LONGHAUL_RETURN_IF_ERROR(FieldReader(*env, "worker.env", src).Check());  // no name twice
    for (const auto& kv : *env) {
      if (!kv.first.IsScalar()) return r.Error(kv.first, "field 'worker.env' must have plain names as keys");
      const std::string name = kv.first.Scalar();
      const std::string value = kv.second.IsScalar() ? kv.second.Scalar() : "";
      const Status ok = worker_rules::CheckEnv(name, value);
      if (!ok.ok()) return r.Error(kv.first, ok.message());
      if (!kv.second.IsScalar())
        return r.Error(kv.first, "field 'worker.env." + name + "' must be a string (write '' for an empty value)");
      (*c->mutable_env())[name] = value;
    }
  }
  const Status ok = worker_rules::CheckWorkingDir(dir);
  if (!ok.ok()) return r.Error(node["working_dir"], ok.message());
  c->set_working_dir(dir);
  return Status::Ok();
}

Status ParseBuiltinWorker(const YAML::Node& node, FieldReader& r, v1::BuiltinWorker* b) {
  for (const char* key : {"env", "working_dir"})
    if (node[key])
      return r.Error(node[key], "field 'worker." + std::string(key) + "' applies only to a 'worker.command'");
  LH_FIELD(r, Str, b, preset);
  LH_FIELD(r, U32, b, context);
  LH_FIELD(r, U32, b, embed);
  LH_FIELD(r, U32, b, hidden);
  LH_FIELD(r, U32, b, layers);
  LONGHAUL_RETURN_IF_ERROR(r.RejectUnknown());
  if (node["preset"]) {
    const Status ok = worker_rules::CheckPreset("worker.preset", b->preset());
    if (!ok.ok()) return r.Error(node["preset"], ok.message());
  }
  const std::pair<const char*, uint32_t> dims[] = {
      {"context", b->context()}, {"embed", b->embed()}, {"hidden", b->hidden()}, {"layers", b->layers()}};
  for (const auto& [key, value] : dims) {
    const Status ok = worker_rules::CheckBuiltinDim(key, value);
    if (!ok.ok()) return r.Error(node[key], ok.message());
  }
  const Status ok = worker_rules::CheckBuiltinDims(*b);
  return ok.ok() ? ok : r.Error(node, ok.message());
}

Status ParseWorker(const YAML::Node& node, std::string_view src, v1::WorkerSpec* w) {
  FieldReader r(node, "worker", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  LH_FIELD(r, U32, w, exit_grace_s);
  if (node["command"]) return ParseCommandWorker(node, src, r, w->mutable_command());
  return ParseBuiltinWorker(node, r, w->mutable_builtin());
}

// DefaultJobSpec names the tiny preset; what the spec says decides what runs. A
// built-in worker's preset is written to both fields so either spelling reads it.
Status ResolveWorker(const YAML::Node& root, const FieldReader& r, bool data_given, v1::JobSpec* spec) {
  const YAML::Node mp = root["model_preset"];
  const bool preset_given = mp && !mp.IsNull();
  if (worker_rules::IsCommandWorker(*spec)) {
    if (preset_given)
      return r.Error(mp,
                     "field 'model_preset' names a built-in trainer preset, but 'worker.command' runs your "
                     "own program; remove one of them");
    spec->clear_model_preset();
    if (!data_given) spec->clear_data();  // the program brings its own
    return Status::Ok();
  }
  if (!spec->has_worker()) return Status::Ok();  // model_preset alone: the older spelling
  v1::BuiltinWorker* b = spec->mutable_worker()->mutable_builtin();
  if (b->preset().empty()) {
    b->set_preset(spec->model_preset());
  } else if (preset_given && b->preset() != spec->model_preset()) {
    return r.Error(mp, "field 'model_preset' (" + ShortQuote(spec->model_preset()) +
                           ") disagrees with 'worker.preset' (" + ShortQuote(b->preset()) +
                           "); give only worker.preset");
  }
  spec->set_model_preset(b->preset());
  return Status::Ok();
}

Status ParseTop(const YAML::Node& root, std::string_view src, v1::JobSpec* spec) {
  FieldReader r(root, "", src);
  LONGHAUL_RETURN_IF_ERROR(r.Check());
  LH_FIELD(r, Str, spec, name, true);
  LH_FIELD(r, Str, spec, model_preset);
  LH_FIELD(r, U64, spec, seed);
  LH_FIELD(r, U32, spec, rounds, true);
  LONGHAUL_RETURN_IF_ERROR(
      r.StrList("regions", spec_limits::kRegion, spec_limits::kMaxRegions, spec->mutable_regions()));
  LH_FIELD(r, U32, spec, region_count);
  LH_FIELD(r, U32, spec, min_regions);
  LH_FIELD(r, U32, spec, workers_per_region);
  LH_FIELD(r, U32, spec, checkpoint_interval);
  if (root["intra_region"]) {
    std::string intra_region;
    LONGHAUL_RETURN_IF_ERROR(r.Str("intra_region", &intra_region));
    auto parsed = proto::IntraRegionFromName(intra_region);
    if (!parsed.ok()) return r.Error(root["intra_region"], parsed.status().message());
    spec->set_intra_region(*parsed);
  }
  std::optional<YAML::Node> worker, data, inner, outer, sync, comp;
  LONGHAUL_RETURN_IF_ERROR(r.Sub("worker", &worker));
  LONGHAUL_RETURN_IF_ERROR(r.Sub("data", &data));
  LONGHAUL_RETURN_IF_ERROR(r.Sub("inner", &inner));
  LONGHAUL_RETURN_IF_ERROR(r.Sub("outer", &outer));
  LONGHAUL_RETURN_IF_ERROR(r.Sub("sync", &sync));
  LONGHAUL_RETURN_IF_ERROR(r.Sub("compression", &comp));
  LONGHAUL_RETURN_IF_ERROR(r.RejectUnknown());
  if (worker) LONGHAUL_RETURN_IF_ERROR(ParseWorker(*worker, src, spec->mutable_worker()));
  if (data) LONGHAUL_RETURN_IF_ERROR(ParseData(*data, src, spec->mutable_data()));
  if (inner) LONGHAUL_RETURN_IF_ERROR(ParseInner(*inner, src, spec->mutable_inner()));
  if (outer) LONGHAUL_RETURN_IF_ERROR(ParseOuter(*outer, src, spec->mutable_outer()));
  if (sync) LONGHAUL_RETURN_IF_ERROR(ParseSync(*sync, src, spec->mutable_sync()));
  if (comp) LONGHAUL_RETURN_IF_ERROR(ParseCompression(*comp, src, spec->mutable_compression()));
  LONGHAUL_RETURN_IF_ERROR(ResolveWorker(root, r, data.has_value(), spec));
  // An explicit region list fixes the count; region_count alone picks any healthy regions.
  if (spec->regions_size() > 0) {
    if (root["region_count"] && spec->region_count() != static_cast<uint32_t>(spec->regions_size()))
      return r.Error(root["region_count"], "field 'region_count' (" + std::to_string(spec->region_count()) +
                                               ") disagrees with the " + std::to_string(spec->regions_size()) +
                                               " names in 'regions'");
    spec->set_region_count(static_cast<uint32_t>(spec->regions_size()));
  }
  if (!root["min_regions"]) spec->set_min_regions(std::min<uint32_t>(spec->min_regions(), spec->region_count()));
  return Status::Ok();
}

// Where each YAML document starts, and nothing else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& m) override { starts.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The start of each of the first two documents. Not YAML::LoadAll: in
// yaml-cpp 0.7 it loops for ever, growing, on some inputs (a lone ",": the
// parser returns empty documents without moving on, yaml-cpp#1040; found by
// fuzz/job_spec_fuzz).
std::vector<YAML::Mark> FirstDocuments(const std::string& yaml) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  DocumentStarts docs;
  while (docs.starts.size() < 2 && parser.HandleNextDocument(docs)) {
  }
  return docs.starts;
}

// The line of the `---` that starts the document at `start`, else the mark's own line.
int SecondDocumentLine(std::string_view yaml, const YAML::Mark& start) {
  const int mark = start.line;
  int line = 0, marker = -1;
  for (size_t pos = 0; pos <= yaml.size() && line <= mark;) {
    const size_t end = std::min(yaml.find('\n', pos), yaml.size());
    const std::string_view text = yaml.substr(pos, end - pos);
    if (text.substr(0, 3) == "---" && (text.size() == 3 || text[3] == ' ' || text[3] == '\t' || text[3] == '\r'))
      marker = line;
    pos = end + 1;
    ++line;
  }
  return (marker >= 0 ? marker : std::max(mark, 0)) + 1;
}

}  // namespace

v1::JobSpec DefaultJobSpec() {
  v1::JobSpec s;
  s.set_rounds(10);  // no default in the table: a job says how long it runs
  proto::FillJobDefaults(&s);
  return s;
}

uint32_t RequiredRegions(const v1::JobSpec& spec) {
  return spec.regions_size() > 0 ? static_cast<uint32_t>(spec.regions_size()) : spec.region_count();
}

Result<v1::JobSpec> ParseJobSpecYaml(std::string_view yaml, std::string_view source) {
  const std::string src(source);
  if (yaml.size() > spec_limits::kMaxJobFileBytes)
    return InvalidArgument(src + " is " + std::to_string(yaml.size()) + " bytes; the limit is 1 MiB");
  YAML::Node doc;
  try {
    const std::string text(yaml);
    const std::vector<YAML::Mark> starts = FirstDocuments(text);
    if (starts.size() > 1 && starts[1].pos == starts[0].pos)
      return InvalidArgument(src + " line " + std::to_string(starts[0].line + 1) +
                             ": not valid YAML: no document can be read from here");
    if (starts.size() > 1)
      return InvalidArgument(src + " line " + std::to_string(SecondDocumentLine(yaml, starts[1])) +
                             ": a second YAML document begins here; a job file holds one job spec");
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(src + " line " + std::to_string(e.mark.line + 1) + ": not valid YAML: " + Clip(e.msg));
  }
  if (!doc || doc.IsNull()) return InvalidArgument(src + ": the job spec is empty");
  v1::JobSpec spec;  // what the file says; the defaults table fills the rest
  try {
    LONGHAUL_RETURN_IF_ERROR(ParseTop(doc, source, &spec));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(src + " line " + std::to_string(e.mark.line + 1) + ": " + Clip(e.msg));
  }
  proto::FillJobDefaults(&spec);
  Status valid = ValidateJobSpec(spec);
  if (!valid.ok()) return InvalidArgument(src + ": " + valid.message());
  return spec;
}

}  // namespace longhaul::orchestrator
