#include "harness/matrix/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "distributed/file_util.h"
#include "distributed/sharding_format.h"
#include "harness/matrix/scenario_parser.h"
#include "harness/matrix/scenario_reader.h"
#include "harness/matrix/scenario_yaml.h"
#include "harness/models/model_name.h"
#include "testing/model_spec.h"

namespace shardcheck {

std::string Cell::ShardingName() const {
  return dcp ? kDcpShardingName : ShardingTypeName(sharding_type);
}

std::vector<std::string> Cell::Labels() const {
  std::vector<std::string> l;
  // shardcheck's own cells always save (the uninterrupted run's checkpoint
  // is what a same-DP or resharded resume loads); an external system's
  // cells only with a resume plan.
  if (!system.External() || resume) l.push_back("checkpoint");
  if (system.External()) {
    l.push_back("systems");
    l.push_back(system.Label());
  }
  for (const std::string& x :
       {optimizer.setup.name, ShardingName(), "dp" + std::to_string(dp), dtype})
    l.push_back(x);
  if (resume && resume->dp != dp) l.push_back("dp" + std::to_string(resume->dp));
  l.push_back(RealModel() ? model : "oracle");
  return l;
}

std::string CellDimension(const Cell& c, const std::string& key) {
  if (key == "id") return c.id;
  if (key == "system") return c.system.Name();
  if (key == "optimizer") return c.optimizer.label;
  if (key == "sharding_type") return c.ShardingName();
  if (key == "dp") return std::to_string(c.dp);
  if (key == "resume_dp") return c.resume ? std::to_string(c.resume->dp) : "none";
  if (key == "dtype") return c.dtype;
  if (key == "model") return c.model;
  if (key == "bucket_size") return std::to_string(c.bucket_size);
  if (key == "seed") return std::to_string(c.seed);
  if (key == "scenario") return c.scenario;
  throw Error(
      "unknown key '" + key +
      "' (id, system, optimizer, sharding_type, dp, resume_dp, dtype, model, bucket_size, seed, "
      "scenario)");
}

bool MatchesFilter(const Cell& c, const std::string& filter) {
  std::stringstream terms(filter);
  std::string term;
  while (std::getline(terms, term, ',')) {
    if (term.empty()) continue;
    const size_t eq = term.find('=');
    if (eq == std::string::npos) {
      if (c.id.find(term) == std::string::npos) return false;
      continue;
    }
    std::string have;
    try {
      have = CellDimension(c, term.substr(0, eq));
    } catch (const Error& e) {
      throw Error(std::string("--filter: ") + e.what());
    }
    if (have != term.substr(eq + 1)) return false;
  }
  return true;
}


using namespace scenario_detail;

namespace {

const std::vector<std::string> kTopKeys = {
    "name",          "description", "system",        "model",   "dtype",       "optimizer",
    "sharding_type", "dp",          "resume",        "steps",   "bucket_size", "seed",
    "micro_batches", "backend",     "checks",        "exclude", "include",     "grad_reduction",
    "expect",        "reason",      "failing_check", "xfail",       "unchecked"};
// The default grad-norm tolerance of real models with fp32 gradient sums,
// whose norms part by reduction order and then by the params' drift
// (measured in docs/scenarios.md, "Default checks": up to 0.7% in fp32 and
// 8% in bf16 over 60 steps with clipping). A norm over one rank's shard is
// off by 30% or more at dp 2.
constexpr double kGradNormRtolFp32 = 2e-2;
constexpr double kGradNormRtolBf16 = 1e-1;
// The default fp32 loss tolerance with fp32 gradient sums: measured up to
// 4.9e-4 relative over 60 steps (docs/scenarios.md, "Default checks").
constexpr double kLossRtolFp32 = 1e-3;
const std::vector<std::string> kMatchKeys = {"system", "optimizer",   "sharding_type",
                                             "dp",     "resume_dp",   "dtype",
                                             "model",  "bucket_size", "seed"};
const std::vector<std::string> kIncludeKeys = {
    "system",        "optimizer", "sharding_type", "dp",           "resume",
    "dtype",         "model",     "bucket_size",   "seed",         "steps",
    "micro_batches", "expect",    "reason",        "failing_check"};

// --- Cells ----------------------------------------------------------------

// One choice of every dimension, with the nodes errors point at.
struct CellChoice {
  SystemSpec system;
  std::string model, dtype;
  const ScenarioOptimizer* optimizer = nullptr;
  YAML::Node optimizer_node;
  ShardingChoice type;
  int dp = 1;
  std::optional<ResumePlan> plan;
  YAML::Node plan_node;
  int64_t bucket = 0;
  uint64_t seed = 1;
  int steps = 12, micro_batches = 24, line = 0;
  std::optional<ExpectedFailure> expect_fail;  // an include entry's own `expect: fail`
};

std::string ModelId(const std::string& model) {
  std::string s = model;
  for (char& ch : s)
    if (ch == ':' || ch == ',' || ch == '=' || ch == '/') ch = '-';
  if (s.size() > 32) {
    // Long shape lists: a short stable digest instead.
    uint64_t h = 1469598103934665603ull;
    for (char ch : model) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    char buf[24];
    std::snprintf(buf, sizeof(buf), "%08llx", static_cast<unsigned long long>(h & 0xffffffffull));
    s = (model.rfind("oracle:sparse-", 0) == 0 ? "oracle-sparse-shapes-" : "oracle-shapes-") +
        std::string(buf);
  }
  return s;
}

// docs/scenarios.md, "Default checks". Oracle models: bitwise everything.
// Real models: params within a tolerance of the reference, except for
// sign-based optimizers (a rounding difference in a gradient near zero flips
// a sign and moves that element by 2 lr), which are judged on the loss; a
// resume must continue bitwise at the same DP size and the loss curve must
// continue.
// External systems (docs/systems.md, "Checks on an external system"):
// bitwise against the system's own single device at every step, the resumed
// run bitwise against the uninterrupted one, and a tolerance against
// shardcheck's reference, whose op sequence the system need not follow.
std::vector<CheckSpec> ExternalDefaultChecks(const Cell& c) {
  std::vector<CheckOn> on = {CheckOn::kParams, CheckOn::kState};
  if (c.dtype != "fp32") on.insert(on.begin() + 1, CheckOn::kMainParams);
  std::vector<CheckSpec> checks;
  for (CheckOn o : on) {
    CheckSpec spec{CheckKind::kBitwise, o};
    spec.against = CheckAgainst::kSingleDevice;
    checks.push_back(spec);
  }
  if (c.resume)
    for (CheckOn o : on) {
      CheckSpec spec{CheckKind::kBitwise, o};
      spec.against = CheckAgainst::kUninterrupted;
      checks.push_back(spec);
    }
  for (CheckOn o : on) {
    const ExternalTolerance t =
        ExternalReferenceTolerance(c.system, c.optimizer.setup, c.dtype,
                                   o == CheckOn::kState        ? ToleranceOn::kState
                                   : o == CheckOn::kMainParams ? ToleranceOn::kMainParams
                                                               : ToleranceOn::kParams);
    checks.push_back({CheckKind::kTolerance, o, t.atol, t.rtol, -1});
  }
  return checks;
}

// The grad norm against the reference's and against the independent fp64
// norm of the global gradients: bitwise when `rtol` is 0, else within rtol.
void AddGradNormChecks(std::vector<CheckSpec>& checks, double rtol) {
  for (CheckAgainst a : {CheckAgainst::kReference, CheckAgainst::kGradients}) {
    CheckSpec spec{rtol > 0 ? CheckKind::kTolerance : CheckKind::kBitwise, CheckOn::kGradNorm, 0.0,
                   rtol, -1};
    spec.against = a;
    checks.push_back(spec);
  }
}

std::vector<CheckSpec> DefaultChecks(const Cell& c) {
  if (c.system.External()) return ExternalDefaultChecks(c);
  std::vector<CheckSpec> checks = {{CheckKind::kBitwise, CheckOn::kParams},
                                   {CheckKind::kBitwise, CheckOn::kMainParams},
                                   {CheckKind::kBitwise, CheckOn::kState}};
  if (!c.RealModel()) {
    // Oracle gradients make the fp64 sum of squares exact in any order.
    AddGradNormChecks(checks, 0.0);
    return checks;
  }
  const bool bf16 = c.dtype == "bf16";
  if (c.grad_reduction == GradReduction::kExact) {
    // Training is bitwise the same at every DP size: everything bitwise against
    // the reference, at every step; the loss (summed over ranks in fp64) and
    // the grad norm (fp64 sums of squares in another order) within 1e-12.
    checks.push_back({CheckKind::kTolerance, CheckOn::kLoss, 0.0, 1e-12, -1});
    if (c.resume) checks.push_back({CheckKind::kLossContinuity, CheckOn::kLoss, 0.0, 1e-12, -1});
    AddGradNormChecks(checks, 1e-12);
    return checks;
  }
  checks.clear();
  if (!c.optimizer.setup.AnySignBased())
    checks.push_back({CheckKind::kTolerance, CheckOn::kParams, bf16 ? 1e-2 : 1e-3, 1e-2, -1});
  checks.push_back({CheckKind::kTolerance, CheckOn::kLoss, 0.0, bf16 ? 1e-2 : kLossRtolFp32, -1});
  AddGradNormChecks(checks, bf16 ? kGradNormRtolBf16 : kGradNormRtolFp32);
  if (c.resume) {
    checks.push_back({CheckKind::kBitwise, CheckOn::kParams});
    checks.push_back(
        {CheckKind::kLossContinuity, CheckOn::kLoss, 0.0, bf16 ? 1e-2 : kLossRtolFp32, -1});
  }
  return checks;
}

std::string CellId(const Cell& c, const Dimensions& d) {
  std::string id = (c.system.External() ? c.system.Name() + "." : "") + c.optimizer.label + "." +
                   c.ShardingName() + ".dp" + std::to_string(c.dp);
  if (c.resume) {
    id += (c.resume->dp == c.dp ? "-resume@" : "-to-dp" + std::to_string(c.resume->dp) + "@") +
          std::to_string(c.resume->save_at);
    if (c.resume->bucket_size) id += "-bs" + std::to_string(*c.resume->bucket_size);
  }
  id += "." + c.dtype + "." + ModelId(c.model);
  if (d.buckets.size() > 1) id += ".bs" + std::to_string(c.bucket_size);
  if (d.seeds.size() > 1) id += ".seed" + std::to_string(c.seed);
  return id;
}

// The sharding types that may change the bucket size on a load: "a or b".
std::string ModelSpaceTypeNames() {
  std::vector<std::string> names;
  for (const ShardingType t : AllShardingTypes())
    if (!FormatOf(t).StoresBufferSpace()) names.push_back(ShardingTypeName(t));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// Fails when a choice cannot run: a whole-param kind that needs a 2-D hidden
// weight on a model without one, or a bucket-size change the type forbids.
void CheckChoice(const Parser& p, const CellChoice& ch) {
  const OptimizerSetup& setup = ch.optimizer->setup;
  if (const OptimizerConfig* needs = setup.NeedsMatrix();
      needs && ModelName::IsOracleText(ch.model)) {
    if (!ModelName::Parse(ch.model).OracleSpec().HasMatrixParams())
      p.Fail(ch.optimizer_node, "optimizer " + ch.optimizer->label +
                                    " needs a 2-D hidden weight (for " + needs->kind() +
                                    "), and model " + ch.model + " has none");
  }
  if (ch.plan && ch.plan->bucket_size && *ch.plan->bucket_size != ch.bucket && !ch.type.dcp &&
      FormatOf(ch.type.type).StoresBufferSpace())
    p.Fail(ch.plan_node, "sharding type " + ShardingTypeName(ch.type.type) +
                             " cannot change the bucket size on resume (only the DP size); use " +
                             ModelSpaceTypeNames());
}

Cell MakeCell(const Parser& p, const std::string& name, const Dimensions& d, const CellChoice& ch) {
  CheckChoice(p, ch);
  Cell c;
  c.scenario = name;
  c.file = p.file();
  c.line = ch.line;
  c.system = ch.system;
  c.model = ch.model;
  c.dtype = ch.dtype;
  c.optimizer = *ch.optimizer;
  c.sharding_type = ch.type.type;
  c.dcp = ch.type.dcp;
  c.dp = ch.dp;
  c.steps = ch.steps;
  c.bucket_size = ch.bucket;
  c.seed = ch.seed;
  c.micro_batches = ch.micro_batches;
  c.backend = d.backend;
  c.grad_reduction = d.grad_reduction;
  c.resume = ch.plan;
  if (c.resume && c.resume->dp == 0) c.resume->dp = ch.dp;
  for (const auto& [check, node] : d.checks) {
    if (check.on == CheckOn::kLoss && !c.RealModel())
      p.Fail(node,
             "a loss check needs a real model (gpt-tiny or moe-tiny); oracle runs have no loss");
    if (check.kind == CheckKind::kLossContinuity && !c.resume) continue;  // nothing to continue
    c.checks.push_back(check);
  }
  if (d.checks.empty()) c.checks = DefaultChecks(c);
  c.expect_fail = ch.expect_fail ? ch.expect_fail : d.expect_fail;
  SystemRequest request;
  request.setup = &c.optimizer.setup;
  request.dcp = c.dcp;
  request.sharding_type = c.sharding_type;
  request.dtype = c.dtype;
  request.real_model = c.RealModel();
  request.bucket_change =
      c.resume && c.resume->bucket_size && *c.resume->bucket_size != c.bucket_size;
  request.gpu = c.backend == "nccl";
  c.unsupported = SystemUnsupported(c.system, request);
  c.id = CellId(c, d);
  return c;
}

// --- Excludes and includes ------------------------------------------------

// An exclude entry: dimension -> accepted values; a cell matches when every
// given dimension does.
struct Match {
  std::map<std::string, std::vector<std::string>> values;
  bool Matches(const Cell& c) const {
    for (const auto& [key, vals] : values)
      if (std::find(vals.begin(), vals.end(), CellDimension(c, key)) == vals.end()) return false;
    return true;
  }
};

std::vector<Match> ReadExcludes(const Parser& p, const YAML::Node& root) {
  std::vector<Match> out;
  if (!root["exclude"]) return out;
  if (!root["exclude"].IsSequence())
    p.Fail(root["exclude"], "exclude: expected a list of mappings");
  for (const auto& n : root["exclude"]) {
    p.CheckKeys(n, kMatchKeys, "exclude entry");
    Match mt;
    for (auto it = n.begin(); it != n.end(); ++it)
      for (const auto& v : p.Items(it->second, it->first.Scalar()))
        mt.values[it->first.Scalar()].push_back(p.Str(v, it->first.Scalar()));
    out.push_back(std::move(mt));
  }
  return out;
}

// The `xfail` list: cells matching an entry's dimensions are expected to
// fail for its `reason`.
std::vector<std::pair<Match, ExpectedFailure>> ReadXfails(const Parser& p, const YAML::Node& root) {
  std::vector<std::pair<Match, ExpectedFailure>> out;
  if (!root["xfail"]) return out;
  if (!root["xfail"].IsSequence())
    p.Fail(root["xfail"], "xfail: expected a list of mappings {<dimension>: ..., reason: ...}");
  std::vector<std::string> keys = kMatchKeys;
  keys.push_back("reason");
  keys.push_back("failing_check");
  for (const auto& n : root["xfail"]) {
    p.CheckKeys(n, keys, "xfail entry");
    if (!n["reason"]) p.Fail(n, "xfail entry: missing key 'reason' (docs/findings.md#<anchor>)");
    ExpectedFailure e{p.Str(n["reason"], "reason"), ""};
    CheckFindingReason(p, n["reason"], e.reason);
    if (n["failing_check"]) e.check = p.Str(n["failing_check"], "failing_check");
    Match mt;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (it->first.Scalar() == "reason" || it->first.Scalar() == "failing_check") continue;
      for (const auto& v : p.Items(it->second, it->first.Scalar()))
        mt.values[it->first.Scalar()].push_back(p.Str(v, it->first.Scalar()));
    }
    out.push_back({std::move(mt), std::move(e)});
  }
  return out;
}

// One include entry: a cell whose unspecified dimensions take the scenario's first value.
std::vector<Cell> IncludeCells(const Parser& p, const std::string& name, const Dimensions& d,
                               const YAML::Node& n) {
  p.CheckKeys(n, kIncludeKeys, "include entry");
  CellChoice ch;
  ch.steps = n["steps"] ? p.Int(n["steps"], "steps") : d.steps;
  if (ch.steps < 1 || ch.steps > kMaxSteps) p.Fail(n["steps"], "steps must be in [1, 100000]");
  ch.micro_batches =
      n["micro_batches"] ? p.Int(n["micro_batches"], "micro_batches") : d.micro_batches;
  if (ch.micro_batches < 1 || ch.micro_batches > 32)
    p.Fail(n["micro_batches"], "micro_batches must be in [1, 32]");
  ch.system = n["system"] ? ReadSystem(p, n["system"]) : d.systems[0].first;
  ch.expect_fail = ReadExpect(p, n);
  ch.model = n["model"] ? ReadModel(p, n["model"]) : d.models[0].first;
  ch.dtype = n["dtype"] ? ReadDtype(p, n["dtype"]) : d.dtypes[0];
  ch.type = n["sharding_type"] ? ReadShardingType(p, n["sharding_type"]) : d.types[0];
  ch.dp = n["dp"] ? p.Int(n["dp"], "dp") : d.dps[0].first;
  if (ch.dp < 1 || ch.micro_batches % ch.dp != 0)
    p.Fail(n["dp"] ? n["dp"] : n, "dp " + std::to_string(ch.dp) +
                                      " does not divide micro_batches " +
                                      std::to_string(ch.micro_batches));
  if (n["resume"]) ch.plan = ReadPlan(p, n["resume"], ch.steps, ch.micro_batches);
  ch.plan_node = n;
  ch.bucket = n["bucket_size"] ? p.Int64(n["bucket_size"], "bucket_size") : d.buckets[0];
  ch.seed = n["seed"] ? static_cast<uint64_t>(p.Int64(n["seed"], "seed")) : d.seeds[0];
  ch.line = static_cast<int>(n.Mark().line) + 1;
  ch.optimizer_node = n;
  std::vector<Cell> cells;
  if (!n["optimizer"]) {
    ch.optimizer = &d.optimizers[0].first;
    cells.push_back(MakeCell(p, name, d, ch));
    return cells;
  }
  const std::vector<ScenarioOptimizer> entries = ReadOptimizer(p, n["optimizer"]);
  for (const ScenarioOptimizer& e : entries) {
    ch.optimizer = &e;
    cells.push_back(MakeCell(p, name, d, ch));
  }
  return cells;
}

// The cross product of every dimension.
std::vector<Cell> CrossProduct(const Parser& p, const std::string& name, const Dimensions& d,
                               int line) {
  std::vector<Cell> cells;
  CellChoice ch;
  ch.steps = d.steps;
  ch.micro_batches = d.micro_batches;
  ch.line = line;
  for (const auto& [system, system_node] : d.systems)
    for (const auto& [model, model_node] : d.models)
      for (const auto& dtype : d.dtypes)
        for (const auto& [opt, opt_node] : d.optimizers)
          for (const ShardingChoice& t : d.types)
            for (const auto& [dp, dp_node] : d.dps)
              for (const auto& [plan, plan_node] : d.plans)
                for (int64_t b : d.buckets)
                  for (uint64_t s : d.seeds) {
                    ch.system = system;
                    ch.model = model;
                    ch.dtype = dtype;
                    ch.optimizer = &opt;
                    ch.optimizer_node = opt_node;
                    ch.type = t;
                    ch.dp = dp;
                    ch.plan = plan;
                    ch.plan_node = plan_node;
                    ch.bucket = b;
                    ch.seed = s;
                    cells.push_back(MakeCell(p, name, d, ch));
                  }
  return cells;
}


}  // namespace

Scenario LoadScenario(const std::string& path) {
  if (!std::filesystem::exists(path)) throw ScenarioError(path + ": no such scenario file");
  if (std::filesystem::is_directory(path))
    throw ScenarioError(path + " is a folder: give its scenario files (e.g. " +
                        (std::filesystem::path(path) / "*.yaml").string() + ")");
  return ParseScenario(ReadFile(path), path);
}

Scenario ParseScenario(const std::string& text, const std::string& path) {
  const YAML::Node root = LoadYaml(text, path);
  Parser p(path);
  if (!root || root.IsNull())
    p.Fail(
        root,
        "no scenario in the file: a scenario is a mapping of keys (name, model, optimizer, ...)");
  std::set<int> visited;
  ResolveMergeKeys(root, visited);
  if (!root.IsMap()) p.Fail(root, "a scenario is a mapping of keys (name, model, optimizer, ...)");
  p.CheckKeys(root, kTopKeys, "scenario");
  CheckQuotesClosed(p, root, text);
  for (const char* required : {"name", "model", "optimizer", "sharding_type", "dp"})
    if (!root[required]) p.Fail(root, std::string("missing key '") + required + "'");
  Scenario sc;
  sc.file = path;
  sc.name = p.Str(root["name"], "name");
  if (root["description"])
    sc.description = p.As<std::string>(root["description"], "description", "a string");
  const Dimensions d = ReadDimensions(p, root);
  const std::vector<Match> excludes = ReadExcludes(p, root);
  const auto xfails = ReadXfails(p, root);
  std::set<std::string> ids;
  auto add = [&](Cell c) {
    for (const Match& m : excludes)
      if (m.Matches(c)) return;
    for (const auto& [m, expected] : xfails)
      if (!c.expect_fail && m.Matches(c)) c.expect_fail = expected;
    // Overlapping plans (e.g. `dp: same` and `dp: 2` on a dp-2 cell) give the
    // same cell twice; it runs once.
    if (ids.insert(c.id).second) sc.cells.push_back(std::move(c));
  };
  for (Cell& c : CrossProduct(p, sc.name, d, static_cast<int>(root.Mark().line) + 1))
    add(std::move(c));
  if (root["include"]) {
    if (!root["include"].IsSequence())
      p.Fail(root["include"], "include: expected a list of mappings");
    for (const auto& n : root["include"])
      for (Cell& c : IncludeCells(p, sc.name, d, n)) add(std::move(c));
  }
  if (sc.cells.empty()) p.Fail(root, "the matrix is empty after exclude");
  if (root["unchecked"]) {
    const std::string why = p.As<std::string>(root["unchecked"], "unchecked", "a string");
    if (why.empty()) p.Fail(root["unchecked"], "unchecked: say why the groups go unchecked");
    for (Cell& c : sc.cells) c.unchecked_reason = why;
  }
  return sc;
}

}  // namespace shardcheck

