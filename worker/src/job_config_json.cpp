#include "longhaul/session/job_config_json.h"

#include "agent_store.h"

#include <nlohmann/json.hpp>

namespace longhaul::session {

std::string JobConfigJson(const worker::JobConfig& c, const SessionOptions& o) {
  nlohmann::json j;
  j["job_id"] = c.job_id;
  j["region"] = c.region;
  j["region_index"] = c.region_index;
  j["region_count"] = c.region_count;
  j["rank"] = o.rank;
  j["world_size"] = c.workers;
  j["workers_per_region"] = c.workers;
  j["rounds"] = c.rounds;
  j["seed"] = c.seed;
  j["checkpoint_interval"] = c.checkpoint_interval;
  j["sync"] = {{"kind", std::string(sync_policies::SyncKindName(c.schedule.kind))},
               {"inner_steps", c.schedule.inner_steps},
               {"fragments", c.schedule.fragments},
               {"overlap_steps", c.schedule.overlap_steps},
               {"mixing_alpha", c.schedule.mixing_alpha}};
  j["inner"] = {{"name", "adamw"},
                {"lr", c.inner.lr},
                {"beta1", c.inner.beta1},
                {"beta2", c.inner.beta2},
                {"weight_decay", c.inner.weight_decay},
                {"warmup_steps", c.inner.warmup_steps},
                {"total_steps", c.inner.total_steps},
                {"batch_size", c.batch_size},
                {"first_moment_sync_rounds", c.moment_sync.first_moment_sync_rounds},
                {"second_moment_sync_rounds", c.moment_sync.second_moment_sync_rounds}};
  j["outer"] = {{"name", c.outer.name}, {"lr", c.outer.lr}, {"momentum", c.outer.momentum}};
  j["compression"] = {{"codec", std::string(sync_policies::CodecName(c.compression.codec))},
                      {"block_size", c.compression.block_size},
                      {"topk_fraction", c.compression.topk_fraction}};
  nlohmann::json data = nlohmann::json::object();
  data["synthetic"] = nullptr;
  data["text_file"] = nullptr;
  if (c.has_data && c.data.kind == "text") {
    data["text_file"] = {{"path", c.data.text_path}, {"validation_fraction", c.data.validation_fraction}};
  } else if (c.has_data && c.data.kind == "synthetic") {
    data["synthetic"] = {{"seed", c.data.seed},
                         {"branching", c.data.branching},
                         {"order", c.data.order},
                         {"non_iid", c.data.non_iid}};
  }
  j["data"] = data;
  if (c.command) {
    j["worker"] = {{"command", c.command->argv}, {"env", c.command->env}, {"working_dir", c.command->working_dir}};
  } else {
    j["worker"] = {{"preset", c.model.preset},
                   {"context", c.model.context},
                   {"embed", c.model.embed_dim},
                   {"hidden", c.model.hidden_dim},
                   {"layers", c.model.hidden_layers}};
  }
  j["worker"]["exit_grace_s"] = c.exit_grace_s;
  return j.dump();
}

Result<std::string> JobConfigJsonFromEnvironment() {
  LONGHAUL_ASSIGN_OR_RETURN(SessionOptions options, SessionOptionsFromEnvironment());
  LONGHAUL_ASSIGN_OR_RETURN(LaunchFromAgent launch, FetchLaunch(options));
  LONGHAUL_ASSIGN_OR_RETURN(auto config, worker::ParseJobAssignment(launch.assignment));
  return JobConfigJson(config, options);
}

}  // namespace longhaul::session
