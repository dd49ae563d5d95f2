#include "harness/matrix/scenario_reader.h"

#include <filesystem>
#include <map>

#include "distributed/file_util.h"
#include "harness/models/model_name.h"
#include "spec/setup_request.h"
#include "testing/model_spec.h"

namespace shardcheck {
namespace scenario_detail {

namespace fs = std::filesystem;

// Optimizer keys besides the hyperparameters the registry declares.
const std::vector<std::string> kOptimizerKeys = {
    "name",           "label",           "scalar_optimizer",
    "max_grad_norm",  "lr_warmup_steps", "lr_decay_steps",
    "lr_decay_style", "min_lr"};
// The ranges of the numeric keys (docs/scenarios.md, "Keys"): past them a cell either
// cannot run on any machine or stops checking anything exact.
constexpr int kMaxDp = 1024;                          // thread- or process-ranks of one cell
constexpr int64_t kMaxBucketSize = int64_t{1} << 40;  // elements
constexpr int64_t kMaxUlp = int64_t{1} << 32;         // past every fp32 distance
const std::vector<std::string> kResumeKeys = {"save_at", "dp", "bucket_size"};
const std::vector<std::string> kCheckKeys = {"kind",    "on",       "atol",   "rtol",
                                             "max_ulp", "min_fall", "against"};

// --- Optimizers -----------------------------------------------------------

// The setup names an optimizer entry's `name` stands for: itself, or every
// named setup (`all`) or every elementwise kind (`all_elementwise`).
std::vector<std::string> ExpandOptimizerName(const std::string& name) {
  if (name == "all") return OptimizerSetup::Names();
  if (name == "all_elementwise") return OptimizerSetup::ElementwiseNames();
  return {name};
}

// A hyperparameter's value as text: a scalar, or a list of numbers joined
// with ',' (e.g. ns_coefficients: [3.4445, -4.775, 2.0315]).
std::string HyperText(const Parser& p, const YAML::Node& value, const std::string& key) {
  if (value.IsMap()) p.Fail(value, key + ": expected a number (or a list of numbers)");
  if (!value.IsSequence()) return p.Str(value, key);
  std::string text;
  for (const auto& x : value) text += (text.empty() ? "" : ",") + p.Str(x, key);
  return text;
}

// Reads the optimizer keys into `r`: first the setup-level ones
// (scalar_optimizer, max_grad_norm, the lr schedule), then each
// hyperparameter, checked on its own against the setup so that an error
// points at its key. Keys that depend on each other (the schedule) are
// checked together by the caller's Resolve.
void ReadOptimizerKeys(const Parser& p, const std::vector<std::pair<YAML::Node, YAML::Node>>& keys,
                       SetupRequest& r) {
  std::vector<std::pair<YAML::Node, YAML::Node>> hyper;
  for (const auto& [key, value] : keys) {
    const std::string k = key.Scalar();
    if (k == "name" || k == "label") continue;
    if (k == "scalar_optimizer")
      r.scalar_optimizer = p.Str(value, k);
    else if (k == "max_grad_norm")
      r.max_grad_norm = p.Number(value, k);
    else if (k == "lr_warmup_steps")
      r.lr_warmup_steps = p.Int64(value, k);
    else if (k == "lr_decay_steps")
      r.lr_decay_steps = p.Int64(value, k);
    else if (k == "lr_decay_style")
      r.lr_decay_style = p.Str(value, k);
    else if (k == "min_lr")
      r.min_lr = p.Number(value, k);
    else
      hyper.push_back({key, value});
  }
  for (const auto& [key, value] : hyper) {
    const std::string k = key.Scalar();
    SetupRequest one;
    one.name = r.name;
    one.scalar_optimizer = r.scalar_optimizer;
    const bool scalar = k.rfind("scalar_", 0) == 0;
    auto& into = scalar ? one.scalar_hyper : one.hyper;
    into.push_back({scalar ? k.substr(7) : k, HyperText(p, value, k)});
    p.At(key, [&] { one.Resolve(); }, "optimizer: ");
    (scalar ? r.scalar_hyper : r.hyper).push_back(into.front());
  }
}

// An optimizer entry: a name, or a mapping {name, label, hyperparameters...}.
// `all` and `all_elementwise` give one entry per setup they stand for.
std::vector<ScenarioOptimizer> ReadOptimizer(const Parser& p, const YAML::Node& n) {
  std::string name, label;
  std::vector<std::pair<YAML::Node, YAML::Node>> keys;
  if (n.IsScalar()) {
    name = p.Str(n, "optimizer");
  } else {
    if (!n.IsMap())
      p.Fail(n, "optimizer: expected a name or a mapping {name: ..., <hyperparameter>: ...}");
    if (!n["name"])
      p.Fail(n, "optimizer: missing key 'name' (" + Join(OptimizerSetup::Names()) + ", all)");
    name = p.Str(n["name"], "optimizer.name");
    if (n["label"]) label = p.Str(n["label"], "optimizer.label");
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar()) p.Fail(it->first, "optimizer: keys must be plain words");
      if (!seen.insert(it->first.Scalar()).second)
        p.Fail(it->first, "duplicate key '" + it->first.Scalar() + "' in optimizer");
      if (it->second.IsNull()) p.Fail(it->first, it->first.Scalar() + ": no value");
      keys.push_back({it->first, it->second});
    }
  }
  const std::vector<std::string> names = ExpandOptimizerName(name);
  if (!label.empty() && names.size() > 1)
    p.Fail(n["label"], "optimizer: a label needs a single optimizer, not " + name);
  std::vector<ScenarioOptimizer> out;
  for (const std::string& setup_name : names) {
    SetupRequest r;
    r.name = setup_name;
    try {
      r.Resolve();
    } catch (const Error& e) {
      p.Fail(n.IsMap() ? n["name"] : n, e.what());
    }
    ReadOptimizerKeys(p, keys, r);
    try {
      OptimizerSetup setup = r.Resolve();
      // Unlabelled entries are named by their resolved setup ("muon" with a
      // scalar optimizer is "muon_sgd"), as their ctest labels are.
      out.push_back({label.empty() ? setup.name : label, std::move(setup)});
    } catch (const Error& e) {
      p.Fail(n, std::string("optimizer ") + setup_name + ": " + e.what());
    }
  }
  return out;
}

// --- Checks, resume plans -------------------------------------------------

CheckSpec ReadCheck(const Parser& p, const YAML::Node& n) {
  p.CheckKeys(n, kCheckKeys, "check");
  if (!n["kind"])
    p.Fail(n, "check: missing key 'kind' (bitwise, tolerance, loss_continuity or loss_fall)");
  if (!n["on"]) p.Fail(n, "check: missing key 'on' (params, main_params, state or loss)");
  CheckSpec c;
  c.kind = p.At(n["kind"], [&] { return ParseCheckKind(p.Str(n["kind"], "kind")); });
  c.on = p.At(n["on"], [&] { return ParseCheckOn(p.Str(n["on"], "on")); });
  if (n["against"]) {
    c.against =
        p.At(n["against"], [&] { return ParseCheckAgainst(p.Str(n["against"], "against")); });
    if (c.on == CheckOn::kLoss)
      p.Fail(n["against"], "check: against goes with on: params, main_params, state or grad_norm");
    const bool norm_against = c.against == CheckAgainst::kReference ||
                              c.against == CheckAgainst::kGradients;
    if (c.on == CheckOn::kGradNorm && !norm_against)
      p.Fail(n["against"], "check: a grad_norm check is against reference or gradients");
    if (c.on != CheckOn::kGradNorm && c.against == CheckAgainst::kGradients)
      p.Fail(n["against"], "check: against: gradients goes with on: grad_norm");
  }
  const bool loss_kind = c.kind == CheckKind::kLossContinuity || c.kind == CheckKind::kLossFall;
  if (loss_kind && c.on != CheckOn::kLoss)
    p.Fail(n, "check: " + CheckKindName(c.kind) + " goes with on: loss");
  if (n["min_fall"]) {
    if (c.kind != CheckKind::kLossFall)
      p.Fail(n["min_fall"], "check: min_fall belongs to kind loss_fall");
    c.min_fall = p.Number(n["min_fall"], "min_fall");
    if (c.min_fall <= 0 || c.min_fall >= 1) p.Fail(n["min_fall"], "min_fall must be in (0, 1)");
  }
  if (c.kind == CheckKind::kLossFall) {
    if (c.min_fall == 0) p.Fail(n, "check: loss_fall needs min_fall (e.g. 0.3 for a 30% fall)");
    return c;
  }
  if (c.kind == CheckKind::kBitwise && c.on == CheckOn::kLoss)
    p.Fail(n,
           "check: losses are compared with tolerance or loss_continuity, not bitwise (a bitwise "
           "same-DP resume check on params covers the losses too)");
  if (n["atol"]) c.atol = p.Number(n["atol"], "atol");
  if (n["rtol"]) c.rtol = p.Number(n["rtol"], "rtol");
  if (n["max_ulp"]) c.max_ulp = p.Int64(n["max_ulp"], "max_ulp");
  if (c.atol < 0 || c.rtol < 0) p.Fail(n, "check: atol and rtol must be >= 0");
  if (c.max_ulp < -1 || c.max_ulp > kMaxUlp)
    p.Fail(n["max_ulp"], "check: max_ulp must be in [0, 2^32] (ULPs of an fp32 value)");
  if (c.kind == CheckKind::kBitwise && (c.atol > 0 || c.rtol > 0 || c.max_ulp > 0))
    p.Fail(n, "check: a bitwise check takes no tolerance");
  if (c.kind != CheckKind::kBitwise && c.atol == 0 && c.rtol == 0 && c.max_ulp < 0)
    p.Fail(n, "check: a " + CheckKindName(c.kind) +
                  " check needs atol, rtol or max_ulp (else use kind: bitwise)");
  return c;
}

// A bucket size in elements: 0 is one bucket; 2^40 elements (4 TiB of fp32) is past any
// model a cell can hold.
int64_t ReadBucketSize(const Parser& p, const YAML::Node& n, const std::string& key) {
  const int64_t b = p.Int64(n, key);
  if (b < 0 || b > kMaxBucketSize)
    p.Fail(n, key + " must be in [0, 2^40] elements (0: one bucket)");
  return b;
}

// A resume plan {save_at, dp: N|same, bucket_size} for a run of `steps` steps.
ResumePlan ReadPlan(const Parser& p, const YAML::Node& n, int steps, int m) {
  p.CheckKeys(n, kResumeKeys, "resume plan");
  if (!n["save_at"]) p.Fail(n, "resume plan: missing key 'save_at'");
  ResumePlan plan;
  plan.save_at = p.Int(n["save_at"], "save_at");
  if (plan.save_at < 1 || plan.save_at >= steps)
    p.Fail(n["save_at"], "save_at " + std::to_string(plan.save_at) +
                             " must be in [1, steps - 1] = [1, " + std::to_string(steps - 1) + "]");
  if (n["dp"] && !(n["dp"].IsScalar() && n["dp"].Scalar() == "same")) {
    plan.dp = p.Int(n["dp"], "resume dp");
    if (plan.dp < 1 || plan.dp > kMaxDp)
      p.Fail(n["dp"], "resume dp must be in [1, 1024] (or 'same')");
    if (m % plan.dp != 0)
      p.Fail(n["dp"], "resume dp " + std::to_string(plan.dp) + " does not divide micro_batches " +
                          std::to_string(m));
  }
  if (n["bucket_size"]) plan.bucket_size = ReadBucketSize(p, n["bucket_size"], "resume bucket_size");
  return plan;
}

// --- Expected failures ----------------------------------------------------

// docs/findings.md above the scenario file (the checkout's), or "" when the
// file is elsewhere.
std::string FindingsFile(const std::string& scenario) {
  std::error_code ec;
  fs::path dir = fs::absolute(scenario, ec).parent_path();
  for (int up = 0; up < 8 && !dir.empty(); ++up, dir = dir.parent_path()) {
    const fs::path f = dir / "docs" / "findings.md";
    if (fs::is_regular_file(f, ec)) return f.string();
    if (dir == dir.parent_path()) break;
  }
  return "";
}

// GitHub's anchor of a Markdown heading: lower case, spaces to '-', other
// punctuation but '-' and '_' dropped.
std::string HeadingAnchor(const std::string& heading) {
  std::string a;
  for (unsigned char ch : heading) {
    if (std::isalnum(ch))
      a += static_cast<char>(std::tolower(ch));
    else if (ch == ' ' || ch == '-')
      a += '-';
    else if (ch == '_')
      a += '_';
  }
  return a;
}

// A reason must point into docs/findings.md ("docs/findings.md#<anchor>"),
// and the anchor must be a heading there when that file can be found.
void CheckFindingReason(const Parser& p, const YAML::Node& n, const std::string& reason) {
  const std::string ref = "docs/findings.md#";
  const size_t at = reason.find(ref);
  if (at == std::string::npos)
    p.Fail(n,
           "reason: an expected failure points into docs/findings.md (docs/findings.md#<anchor>), "
           "where the upstream bug is described");
  size_t end = at + ref.size();
  while (end < reason.size() && (std::isalnum(static_cast<unsigned char>(reason[end])) ||
                                 reason[end] == '-' || reason[end] == '_'))
    ++end;
  const std::string anchor = reason.substr(at + ref.size(), end - at - ref.size());
  if (anchor.empty()) p.Fail(n, "reason: docs/findings.md# needs the anchor of a finding");
  const std::string file = FindingsFile(p.file());
  if (file.empty()) return;
  std::istringstream in(ReadFile(file));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) != 0) continue;
    const size_t begin = line.find_first_not_of("# ");
    const size_t end = line.find_last_not_of(" \r");
    if (begin != std::string::npos && HeadingAnchor(line.substr(begin, end + 1 - begin)) == anchor)
      return;
  }
  p.Fail(n, "reason: " + file + " has no heading with the anchor #" + anchor);
}

// `expect: fail` and its `reason` in mapping `n` (the scenario or an include
// entry); nothing when `n` has neither.
std::optional<ExpectedFailure> ReadExpect(const Parser& p, const YAML::Node& n) {
  if (!n["expect"] && !n["reason"] && !n["failing_check"]) return std::nullopt;
  if (!n["expect"])
    p.Fail(n["reason"] ? n["reason"] : n["failing_check"],
           (n["reason"] ? "reason" : "failing_check") + std::string(": goes with expect: fail"));
  if (p.Str(n["expect"], "expect") != "fail")
    p.Fail(n["expect"], "expect: '" + n["expect"].Scalar() +
                            "' (the only expectation is fail: a cell that passes needs none)");
  if (!n["reason"])
    p.Fail(n["expect"], "expect: fail needs a reason pointing into docs/findings.md");
  ExpectedFailure e{p.Str(n["reason"], "reason"), ""};
  CheckFindingReason(p, n["reason"], e.reason);
  if (n["failing_check"]) e.check = p.Str(n["failing_check"], "failing_check");
  return e;
}

SystemSpec ReadSystem(const Parser& p, const YAML::Node& n) {
  return p.At(n, [&] { return ParseSystem(p.Str(n, "system")); });
}

std::string ReadModel(const Parser& p, const YAML::Node& n) {
  const std::string model = p.Str(n, "model");
  try {
    ModelName::Parse(model);
  } catch (const Error& e) {
    p.Fail(n, e.what());
  }
  return model;
}

std::string ReadDtype(const Parser& p, const YAML::Node& n) {
  const std::string d = p.Str(n, "dtype");
  if (d != "fp32" && d != "bf16") p.Fail(n, "dtype '" + d + "' (expected fp32 or bf16)");
  return d;
}

ShardingChoice ReadShardingType(const Parser& p, const YAML::Node& n) {
  const std::string name = p.Str(n, "sharding_type");
  if (name == kDcpShardingName) return {ShardingType::kDpReshardable, true};
  try {
    return {ParseShardingType(name), false};
  } catch (const Error& e) {
    p.Fail(n, std::string(e.what()) +
                  "; or dcp, torch.distributed.checkpoint's, for systems "
                  "that save through it");
  }
}

int ReadDp(const Parser& p, const YAML::Node& n, int m) {
  const int dp = p.Int(n, "dp");
  if (dp < 1 || dp > kMaxDp) p.Fail(n, "dp must be in [1, 1024]");
  if (m % dp != 0)
    p.Fail(n, "dp " + std::to_string(dp) + " does not divide micro_batches " + std::to_string(m));
  return dp;
}

// steps, micro_batches and backend: what the other dimensions are checked against.
void ReadRunShape(const Parser& p, const YAML::Node& root, Dimensions& d) {
  if (root["steps"]) d.steps = p.Int(root["steps"], "steps");
  if (d.steps < 1 || d.steps > kMaxSteps) p.Fail(root["steps"], "steps must be in [1, 100000]");
  if (root["micro_batches"]) d.micro_batches = p.Int(root["micro_batches"], "micro_batches");
  if (d.micro_batches < 1 || d.micro_batches > 32)
    p.Fail(root["micro_batches"],
           "micro_batches must be in [1, 32] (the oracle's sums stay exact up to 32)");
  if (root["backend"]) {
    d.backend = p.Str(root["backend"], "backend");
    if (d.backend != "gloo" && d.backend != "nccl" && d.backend != "auto")
      p.Fail(root["backend"], "backend '" + d.backend + "' (expected gloo, nccl or auto)");
  }
  if (root["grad_reduction"]) {
    const std::string r = p.Str(root["grad_reduction"], "grad_reduction");
    if (r != "fp32" && r != "exact")
      p.Fail(root["grad_reduction"], "grad_reduction '" + r + "' (expected fp32 or exact)");
    d.grad_reduction = ParseGradReduction(r);
  }
}

void ReadPlans(const Parser& p, const YAML::Node& root, Dimensions& d) {
  d.plans = {{std::nullopt, root}};
  if (!root["resume"]) return;
  d.plans.clear();
  for (const auto& n : p.Items(root["resume"], "resume")) {
    if (n.IsScalar()) {
      if (n.Scalar() != "none") p.Fail(n, "resume: expected 'none' or {save_at: K, dp: N|same}");
      d.plans.push_back({std::nullopt, n});
      continue;
    }
    d.plans.push_back({ReadPlan(p, n, d.steps, d.micro_batches), n});
  }
}

Dimensions ReadDimensions(const Parser& p, const YAML::Node& root) {
  Dimensions d;
  ReadRunShape(p, root, d);
  d.expect_fail = ReadExpect(p, root);
  d.systems = {{SystemSpec{}, root}};
  if (root["system"]) {
    d.systems.clear();
    for (const auto& n : p.Items(root["system"], "system"))
      d.systems.push_back({ReadSystem(p, n), n});
  }
  for (const auto& n : p.Items(root["model"], "model")) d.models.push_back({ReadModel(p, n), n});
  if (root["dtype"]) {
    d.dtypes.clear();
    for (const auto& n : p.Items(root["dtype"], "dtype")) d.dtypes.push_back(ReadDtype(p, n));
  }
  for (const auto& n : p.Items(root["optimizer"], "optimizer"))
    for (auto& e : ReadOptimizer(p, n)) d.optimizers.push_back({std::move(e), n});
  for (const auto& n : p.Items(root["sharding_type"], "sharding_type"))
    d.types.push_back(ReadShardingType(p, n));
  for (const auto& n : p.Items(root["dp"], "dp"))
    d.dps.push_back({ReadDp(p, n, d.micro_batches), n});
  ReadPlans(p, root, d);
  if (root["bucket_size"]) {
    d.buckets.clear();
    for (const auto& n : p.Items(root["bucket_size"], "bucket_size")) {
      d.buckets.push_back(ReadBucketSize(p, n, "bucket_size"));
    }
  }
  if (root["seed"]) {
    d.seeds.clear();
    for (const auto& n : p.Items(root["seed"], "seed")) {
      const int64_t s = p.Int64(n, "seed");
      if (s < 0) p.Fail(n, "seed must be >= 0");
      d.seeds.push_back(static_cast<uint64_t>(s));
    }
  }
  if (root["checks"]) {
    if (!root["checks"].IsSequence())
      p.Fail(root["checks"], "checks: expected a list of {kind, on, ...}");
    for (const auto& n : root["checks"]) d.checks.push_back({ReadCheck(p, n), n});
  }
  return d;
}


}  // namespace scenario_detail
}  // namespace shardcheck
