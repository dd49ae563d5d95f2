#include "harness/matrix/external_cell.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "harness/cell/compare.h"
#include "harness/cell/run_files.h"
#include "harness/matrix/cell_phases.h"
#include "harness/matrix/result_json.h"
#include "harness/models/grad_source.h"
#include "harness/models/model_name.h"
#include "harness/systems/plan.h"
#include "spec/error.h"
#include "spec/state_dict.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

// The whole adapter run's limit: every collective may take the cell's
// timeout, and a run holds a few dozen of them per step.
constexpr double kAdapterRunLimitS = 900.0;

PlanInputs CellPlan(const Cell& cell, std::chrono::milliseconds timeout) {
  PlanInputs in;
  in.cell = cell.id;
  in.system = cell.system;
  in.model = ModelName::Parse(cell.model).OracleSpec();
  in.dtype = cell.dtype;
  in.seed = cell.seed;
  in.micro_batches = cell.micro_batches;
  in.setup = cell.optimizer.setup;
  in.sharding_type = cell.ShardingName();
  in.steps = cell.steps;
  in.timeout_s = static_cast<double>(timeout.count()) / 1000.0;
  in.runs.push_back({kSingleDeviceRun, 1, 1, cell.steps, 0, false});
  in.runs.push_back(
      {kUninterruptedRun, cell.dp, 1, cell.steps, cell.resume ? cell.resume->save_at : 0, false});
  if (cell.resume)
    in.runs.push_back(
        {kResumedRun, cell.resume->dp, cell.resume->save_at + 1, cell.steps, 0, true});
  // The negative check's bug, switched on by a test (docs/systems.md, "The negative check").
  if (const char* inject = std::getenv("SHARDCHECK_ADAPTER_INJECT"); inject && *inject)
    in.inject.push_back(inject);
  return in;
}

// One entry of "adapter" in result.json: how a run went.
nlohmann::ordered_json AdapterRunJson(const AdapterRun& a, const fs::path& cell_dir) {
  nlohmann::ordered_json j;
  j["run"] = a.run;
  j["exit_code"] = a.exit_code;
  j["log"] = fs::relative(a.log, cell_dir).string();
  const AdapterRank* c = a.Culprit();
  j["error"] = c && c->error.is_object() ? nlohmann::ordered_json(c->error)
                                         : nlohmann::ordered_json(nullptr);
  if (!j["error"].is_null()) j["error"]["rank"] = c->rank;
  j["notes"] = nlohmann::ordered_json::array();
  for (const auto& r : a.ranks)
    for (const auto& n : r.notes) j["notes"].push_back("rank " + std::to_string(r.rank) + ": " + n);
  return j;
}

// The groups of `tensors`' keys, in first-seen order after params and main_params.
std::vector<std::string> GroupsOf(const std::map<std::string, at::Tensor>& tensors) {
  std::vector<std::string> groups = {"params"}, state;
  bool main = false;
  for (const auto& [key, t] : tensors) {
    const StateDictKey k = ParseStateDictKey(key);
    if (k.role == StateDictKey::Role::kMainParam) main = true;
    if (k.role == StateDictKey::Role::kState &&
        std::find(state.begin(), state.end(), k.state_key) == state.end())
      state.push_back(k.state_key);
  }
  if (main) groups.push_back("main_params");
  groups.insert(groups.end(), state.begin(), state.end());
  return groups;
}

std::string KeyGroup(const std::string& key) {
  const StateDictKey k = ParseStateDictKey(key);
  if (k.role == StateDictKey::Role::kParam) return "params";
  if (k.role == StateDictKey::Role::kMainParam) return "main_params";
  return k.state_key;
}

// Per-group figures of `a` against `b` on b's keys (a key missing in `a` is
// skipped here: the checks name it).
std::vector<GroupStep> Figures(const std::map<std::string, at::Tensor>& a,
                               const std::map<std::string, at::Tensor>& b,
                               const std::vector<std::string>& groups, double atol, double rtol) {
  std::vector<GroupStep> out;
  for (const auto& g : groups) out.push_back({g});
  for (const auto& [key, tb] : b) {
    const auto it = a.find(key);
    if (it == a.end()) continue;
    const auto gi = std::find(groups.begin(), groups.end(), KeyGroup(key));
    if (gi == groups.end()) continue;
    GroupStep& f = out[static_cast<size_t>(gi - groups.begin())];
    const TensorDiff d = CompareBitwise(key, it->second, tb, RelFloor(atol));
    f.mismatches += d.mismatches;
    f.max_abs = std::max(f.max_abs, d.max_abs);
    f.max_rel = std::max(f.max_rel, d.max_rel);
    f.max_ulp = std::max(f.max_ulp, d.max_ulp);
    f.sign_changes += d.sign_changes;
    if (atol > 0 || rtol > 0)
      f.tol_violations += CompareTolerance(key, it->second, tb, rtol, atol).mismatches;
  }
  return out;
}

// A run's series as RunJson takes them: per snapshot, figures against
// `base(step)` on `groups`.
template <typename BaseFn>
TrainResult Series(const RunSnapshots& run, const ReferenceTrajectory& reference,
                   const std::vector<std::string>& groups, double atol, double rtol, BaseFn base) {
  TrainResult r;
  for (const Snapshot& s : run.snapshots) {
    StepRecord rec;
    rec.step = s.step;
    rec.after_load = s.after_load;
    rec.loss = std::numeric_limits<double>::quiet_NaN();
    rec.grad_norm = std::numeric_limits<double>::quiet_NaN();
    rec.lr = s.step >= 1 && s.step <= reference.steps()
                 ? reference.lr[static_cast<size_t>(s.step - 1)]
                 : std::numeric_limits<double>::quiet_NaN();
    if (const std::map<std::string, at::Tensor>* b = base(s.step))
      rec.groups = Figures(s.tensors, *b, groups, atol, rtol);
    r.steps.push_back(rec);
  }
  return r;
}

// "runs" of result.json: the reference, the single-device run and each
// distributed run, whose `diff` is against the reference (as in shardcheck's
// own cells) and `diff_single_device` against the system's single device.
nlohmann::ordered_json RunsJson(const Cell& cell, const ExternalRuns& r,
                                const std::vector<std::string>& reference_groups) {
  const auto [atol, rtol] = CountTolerance(cell);
  auto at_reference = [&](int64_t step) -> const std::map<std::string, at::Tensor>* {
    if (step < 0 || step >= static_cast<int64_t>(r.reference.snapshots.size())) return nullptr;
    return &r.reference.snapshots[static_cast<size_t>(step)].tensors;
  };
  auto at_single = [&](int64_t step) -> const std::map<std::string, at::Tensor>* {
    const Snapshot* s = r.single_device.AtStep(step);
    return s ? &s->tensors : nullptr;
  };
  nlohmann::ordered_json runs;
  runs["reference"] = ReferenceJson(r.reference, false);
  runs["single_device"] =
      RunJson(Series(r.single_device, r.reference, reference_groups, atol, rtol, at_reference), 1,
              reference_groups);
  auto distributed = [&](const RunSnapshots& run, int dp) {
    nlohmann::ordered_json j = RunJson(
        Series(run, r.reference, reference_groups, atol, rtol, at_reference), dp, reference_groups);
    j["diff_single_device"] =
        RunJson(Series(run, r.reference, r.groups, 0.0, 0.0, at_single), dp, r.groups)["diff"];
    return j;
  };
  runs["uninterrupted"] = distributed(r.uninterrupted, cell.dp);
  if (r.resumed) {
    runs["resumed"] = distributed(*r.resumed, cell.resume->dp);
    runs["resumed"]["save_at"] = cell.resume->save_at;
  }
  return runs;
}

// The cell's checks on its runs: checks, verdict and first_failure of `j`.
void JudgeChecks(const Cell& cell, const ExternalRuns& r, nlohmann::ordered_json& j) {
  CheckList checks;
  for (const CheckSpec& c : cell.checks) {
    const CheckOutcome out = EvaluateExternalCheck(c, cell, r);
    checks.Add(CheckJson(c, out), out);
  }
  checks.WriteTo(j);
}

// A run the system under test failed: the cell fails the check `system-raised`.
void SystemRaised(const AdapterRun& a, nlohmann::ordered_json& j) {
  CheckOutcome out;
  out.verdict = Verdict::kFail;
  out.run = a.run;
  out.against = "the run itself";
  out.detail = a.Failure();
  const AdapterRank* c = a.Culprit();
  if (c && c->error.is_object() && c->error.contains("step") &&
      c->error["step"].is_number_integer())
    out.step = c->error["step"].get<int64_t>();
  CheckList checks;
  checks.Add(NamedCheckJson("system-raised", "state", out), out);
  checks.WriteTo(j);
}

ErrorKind KindOfExit(int code) {
  if (code == 2) return ErrorKind::kInput;
  if (code == 124) return ErrorKind::kTimeout;
  return ErrorKind::kEnvironment;
}

// The versions the adapter's ranks reported (the first rank that did).
nlohmann::ordered_json Versions(const std::vector<AdapterRun>& runs) {
  for (const auto& a : runs)
    for (const auto& r : a.ranks)
      if (r.versions.is_object() && !r.versions.empty()) return r.versions;
  return nlohmann::ordered_json::object();
}

// Runs the plan's runs in order. Returns false when the system under test
// raised (`j` then holds the failed check); throws Error for any other failure.
bool RunPlan(const Cell& cell, const PlanInputs& plan, const std::string& plan_path,
             nlohmann::ordered_json& j) {
  const AdapterCommand adapter = FindAdapter(cell.system);
  std::vector<AdapterRun> done;
  j["adapter"] = nlohmann::ordered_json::array();
  for (const PlanRun& run : plan.runs) {
    done.push_back(RunAdapter(adapter, plan_path, run.name, run.dp, kAdapterRunLimitS));
    j["adapter"].push_back(AdapterRunJson(done.back(), fs::path(plan_path).parent_path()));
    j["environment"]["system"] = {{"name", cell.system.Name()}, {"versions", Versions(done)}};
    if (done.back().Ok()) continue;
    if (done.back().SystemFailed()) {
      SystemRaised(done.back(), j);
      return false;
    }
    throw Error(done.back().Failure(), KindOfExit(done.back().exit_code));
  }
  return true;
}

// shardcheck's reference and the snapshots the runs wrote.
ExternalRuns ReadExternalRuns(const Cell& cell, const fs::path& dir) {
  ExternalRuns r;
  const auto source = MakeGradSource(cell.model, cell.seed);
  const OracleRunOptions run = CellRunOptions(cell, *source);
  r.reference = RunReferenceTrajectory(*source, run.setup, run.dtype, run.steps, run.micro_batches);
  r.single_device =
      ReadRunSnapshots((dir / kSingleDeviceRun).string(), kSingleDeviceRun, 1, cell.steps, false);
  r.uninterrupted =
      ReadRunSnapshots((dir / kUninterruptedRun).string(), kUninterruptedRun, 1, cell.steps, false);
  if (cell.resume)
    r.resumed = ReadRunSnapshots((dir / kResumedRun).string(), kResumedRun,
                                 cell.resume->save_at + 1, cell.steps, true);
  r.groups = GroupsOf(r.single_device.snapshots.back().tensors);
  return r;
}

// schema, system_state_keys, groups, rel_floor, runs, checks, verdict.
void AddExternalResult(const Cell& cell, const ExternalRuns& r, nlohmann::ordered_json& j) {
  const std::vector<std::string> reference_groups = GroupsOf(r.reference.snapshots.back().tensors);
  nlohmann::ordered_json schema = nlohmann::ordered_json::object();
  for (const OptimizerConfig* c : cell.optimizer.setup.Children())
    schema[c->kind()] = c->schema().Names();
  j["schema"] = schema;
  std::vector<std::string> state_keys;
  for (const auto& g : r.groups)
    if (g != "params" && g != "main_params") state_keys.push_back(g);
  j["system_state_keys"] = state_keys;
  j["groups"] = reference_groups;
  j["rel_floor"] = RelFloor(CountTolerance(cell).first);
  j["runs"] = RunsJson(cell, r, reference_groups);
  JudgeChecks(cell, r, j);
}

}  // namespace

void RunExternalCell(const Cell& cell, const std::string& cell_dir,
                     std::chrono::milliseconds timeout, nlohmann::ordered_json& j) {
  const PlanInputs plan = CellPlan(cell, timeout);
  const std::string plan_path = (fs::path(cell_dir) / "plan.json").string();
  WriteJsonFile(plan_path, PlanJson(plan));
  if (!RunPlan(cell, plan, plan_path, j)) return;
  AddExternalResult(cell, ReadExternalRuns(cell, cell_dir), j);
}

}  // namespace shardcheck
