// The launcher kinds' table, the local launcher, and the per-task environment
// longhaul-task computes under srun.
#include "longhaul/region_agent/worker_launcher.h"

#include <cctype>
#include <charconv>
#include <iterator>

#include "slurm_launcher.h"

namespace longhaul::region_agent {

std::string_view LauncherKindName(LauncherKind kind) {
  for (const auto& row : kLauncherKinds) {
    if (row.kind == kind) return row.name;
  }
  return "unknown";
}

Result<LauncherKind> ParseLauncherKind(std::string_view name) {
  std::string names;
  for (const auto& row : kLauncherKinds) {
    if (row.name == name) return row.kind;
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  }
  return InvalidArgument("launcher '" + std::string(name) + "' is not one of " + names);
}

Status SlurmOptions::Validate() const {
  if (nodes < 1) return InvalidArgument("slurm nodes must be >= 1, got " + std::to_string(nodes));
  if (ntasks_per_node < 0) {
    return InvalidArgument("slurm ntasks-per-node must be >= 0 (0 = Slurm's choice), got " + std::to_string(ntasks_per_node));
  }
  // Each is one srun argument: no spaces or option syntax smuggled through.
  for (const auto& [field, value] : {std::pair{"partition", &partition}, {"account", &account}, {"time", &time_limit}}) {
    for (const char c : *value) {
      if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_' && c != ':' && c != '.' && c != ',') {
        return InvalidArgument(std::string("slurm ") + field + " '" + *value + "' has a character other than letters, digits, - _ : . ,");
      }
    }
  }
  return Status::Ok();
}

Status LauncherOptions::Validate() const {
  return kind == LauncherKind::kSlurm ? slurm.Validate() : Status::Ok();
}

namespace {

// Today's launcher: every worker a child process of the agent.
class LocalLauncher final : public WorkerLauncher {
 public:
  LauncherKind kind() const override { return LauncherKind::kLocal; }
  Result<std::vector<LaunchedProcess>> Start(const LaunchRequest& request) override {
    std::vector<LaunchedProcess> out;
    for (int rank = 0; rank < request.workers; ++rank) {
      auto child = ChildProcess::Spawn(request.spawn(rank));
      if (!child.ok()) return child.status().WithContext("starting worker " + std::to_string(rank));
      LaunchedProcess p{std::move(*child), "", rank};
      p.name = "worker " + std::to_string(rank) + " (pid " + std::to_string(p.child.pid()) + ")";
      out.push_back(std::move(p));
    }
    return out;
  }
  std::string SchedulerState() override { return ""; }
  void Cancel() override {}
};

// "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""}.
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0;;) {
    const size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) return out;
    pos = comma + 1;
  }
}

Result<int> Integer(const std::function<std::optional<std::string>(const std::string&)>& get, const std::string& name) {
  const auto v = get(name);
  if (!v || v->empty()) return FailedPrecondition(name + " is not set: longhaul-task runs only as a task of srun");
  int out = 0;
  const char* end = v->data() + v->size();
  if (std::from_chars(v->data(), end, out).ptr != end || out < 0) {
    return InvalidArgument(name + " must be a non-negative integer, got '" + v->substr(0, 32) + "'");
  }
  return out;
}

// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of the first 3 nodes,
// then 1) -> the tasks on node `node`. The whole value is checked first.
Result<int> TasksOnNode(const std::string& spec, int node) {
  const auto bad = [&] { return InvalidArgument("SLURM_STEP_TASKS_PER_NODE '" + spec.substr(0, 64) + "' is malformed"); };
  const auto number = [](const std::string& text, int* out) {
    return !text.empty() && std::from_chars(text.data(), text.data() + text.size(), *out).ptr == text.data() + text.size() &&
           *out >= 1;
  };
  std::vector<std::pair<int, int>> groups;  // (tasks per node, nodes)
  for (const std::string& item : SplitCommas(spec)) {
    const auto paren = item.find("(x");
    int tasks = 0;
    int repeat = 1;
    if (!number(item.substr(0, paren), &tasks)) return bad();
    if (paren != std::string::npos &&
        (item.back() != ')' || !number(item.substr(paren + 2, item.size() - paren - 3), &repeat))) {
      return bad();
    }
    groups.emplace_back(tasks, repeat);
  }
  int first = 0;
  for (const auto& [tasks, repeat] : groups) {
    if (node < first + repeat) return tasks;
    first += repeat;
  }
  return InvalidArgument("SLURM_STEP_TASKS_PER_NODE '" + spec.substr(0, 64) + "' lists " + std::to_string(first) +
                         " nodes, SLURM_NODEID is " + std::to_string(node));
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> SlurmTaskEnvironment(
    const std::function<std::optional<std::string>(const std::string&)>& get) {
  LONGHAUL_ASSIGN_OR_RETURN(int rank, Integer(get, "SLURM_PROCID"));
  LONGHAUL_ASSIGN_OR_RETURN(int tasks, Integer(get, "SLURM_NTASKS"));
  LONGHAUL_ASSIGN_OR_RETURN(int local_rank, Integer(get, "SLURM_LOCALID"));
  LONGHAUL_ASSIGN_OR_RETURN(int node, Integer(get, "SLURM_NODEID"));
  const auto per_node = get("SLURM_STEP_TASKS_PER_NODE");
  if (!per_node) return FailedPrecondition("SLURM_STEP_TASKS_PER_NODE is not set: longhaul-task runs only as a task of srun");
  LONGHAUL_ASSIGN_OR_RETURN(int local_size, TasksOnNode(*per_node, node));
  if (rank >= tasks || local_rank >= local_size) {
    return InvalidArgument("SLURM_PROCID " + std::to_string(rank) + " / SLURM_LOCALID " + std::to_string(local_rank) +
                           " outside the step's " + std::to_string(tasks) + " tasks (" + std::to_string(local_size) +
                           " on this node)");
  }
  const auto tokens = get(kWorkerTokensVariable);
  if (!tokens) return FailedPrecondition(std::string(kWorkerTokensVariable) + " is not set: the agent starts longhaul-task");
  const std::vector<std::string> list = SplitCommas(*tokens);
  if (static_cast<int>(list.size()) != tasks) {
    return InvalidArgument(std::string(kWorkerTokensVariable) + " has " + std::to_string(list.size()) +
                           " tokens for SLURM_NTASKS " + std::to_string(tasks) + " tasks");
  }
  const std::string values[] = {std::to_string(rank),       std::to_string(rank),       std::to_string(tasks),
                                std::to_string(local_rank), std::to_string(local_size), list[static_cast<size_t>(rank)]};
  static_assert(std::size(values) == std::size(kPerTaskVariables));
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < std::size(values); ++i) out.emplace_back(kPerTaskVariables[i], values[i]);
  return out;
}

std::unique_ptr<WorkerLauncher> MakeWorkerLauncher(const LauncherOptions& options) {
  if (options.kind == LauncherKind::kSlurm) return std::make_unique<SlurmLauncher>(options.slurm);
  return std::make_unique<LocalLauncher>();
}

}  // namespace longhaul::region_agent
