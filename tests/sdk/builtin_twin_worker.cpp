// The built-in trainer driven through the C ABI instead of longhaul-worker:
// the same ByteLM, data, seed and AdamW, built from the job's JSON config, so
// its committed hashes must equal longhaul-worker's bit for bit (one path).
// It trains the tiny preset (a command job's config has no model dimensions).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "longhaul/session/c_api.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/trainer.h"

namespace lt = longhaul::trainer;

int main() {
  lh_session* s = nullptr;
  if (lh_session_open(&s) != LH_OK) {
    std::fprintf(stderr, "twin: %s\n", lh_last_error());
    return 2;
  }
  const auto cfg = nlohmann::json::parse(lh_session_job_config_json(s));
  lt::DataOptions d;
  const auto& syn = cfg["data"]["synthetic"];
  d.kind = "synthetic";
  d.seed = syn["seed"].get<uint64_t>();
  d.branching = syn["branching"].get<uint32_t>();
  d.order = syn["order"].get<uint32_t>();
  d.non_iid = syn["non_iid"].get<bool>();
  auto data = lt::MakeDataSource(d, cfg["region_index"].get<uint32_t>(), cfg["region_count"].get<uint32_t>(),
                                 cfg["rank"].get<uint32_t>(), cfg["world_size"].get<uint32_t>());
  if (!data.ok()) return 2;
  auto group = lt::MakeSingleRankGroup();
  lt::TrainerOptions t;
  t.model = *lt::ModelPreset("tiny");  // what the built-in job it is compared with trains
  const auto& in = cfg["inner"];
  t.adamw.lr = in["lr"].get<float>();
  t.adamw.beta1 = in["beta1"].get<float>();
  t.adamw.beta2 = in["beta2"].get<float>();
  t.adamw.weight_decay = in["weight_decay"].get<float>();
  t.adamw.warmup_steps = in["warmup_steps"].get<uint32_t>();
  t.adamw.total_steps = in["total_steps"].get<uint64_t>();
  t.batch_size = in["batch_size"].get<int>();
  t.seed = cfg["seed"].get<uint64_t>();
  if (!t.Validate().ok()) return 2;
  lt::InnerTrainer trainer(t, **data, *group);
  auto params = trainer.model().params();
  if (lh_session_start(s, params.data(), params.size()) != LH_OK) {
    std::fprintf(stderr, "twin: %s\n", lh_last_error());
    return 2;
  }
  while (!lh_session_finished(s)) {
    const uint64_t t0 = trainer.tokens();
    auto loss = trainer.Step();
    int event = 0;
    const int rc = loss.ok() ? lh_session_step(s, *loss, trainer.tokens() - t0, &event)
                             : lh_session_fail_round(s, loss.status().ToString().c_str(), &event);
    if (rc != LH_OK) {
      std::fprintf(stderr, "twin: %s\n", lh_last_error());
      return 1;
    }
  }
  lh_session_close(s);
  return 0;
}
