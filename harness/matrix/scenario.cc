#include "harness/matrix/scenario.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "distributed/file_util.h"
#include "distributed/sharding_format.h"
#include "spec/setup_request.h"
#include "testing/model_spec.h"

namespace shardcheck {

namespace fs = std::filesystem;

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

namespace {

const std::vector<std::string> kTopKeys = {
    "name",          "description", "system",        "model",   "dtype",       "optimizer",
    "sharding_type", "dp",          "resume",        "steps",   "bucket_size", "seed",
    "micro_batches", "backend",     "checks",        "exclude", "include",     "grad_reduction",
    "expect",        "reason",      "failing_check", "xfail",       "unchecked"};
// Optimizer keys besides the hyperparameters the registry declares.
const std::vector<std::string> kOptimizerKeys = {
    "name",           "label",           "scalar_optimizer",
    "max_grad_norm",  "lr_warmup_steps", "lr_decay_steps",
    "lr_decay_style", "min_lr"};
// The ranges of the numeric keys (docs/scenarios.md, "Keys"): past them a cell either
// cannot run on any machine or stops checking anything exact.
constexpr int kMaxDp = 1024;                          // thread- or process-ranks of one cell
constexpr int kMaxSteps = 100000;                     // a cell is a test, not a training run
constexpr int64_t kMaxBucketSize = int64_t{1} << 40;  // elements
constexpr int64_t kMaxUlp = int64_t{1} << 32;         // past every fp32 distance
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
const std::vector<std::string> kResumeKeys = {"save_at", "dp", "bucket_size"};
const std::vector<std::string> kCheckKeys = {"kind",    "on",       "atol",   "rtol",
                                             "max_ulp", "min_fall", "against"};
const std::vector<std::string> kMatchKeys = {"system", "optimizer",   "sharding_type",
                                             "dp",     "resume_dp",   "dtype",
                                             "model",  "bucket_size", "seed"};
const std::vector<std::string> kIncludeKeys = {
    "system",        "optimizer", "sharding_type", "dp",           "resume",
    "dtype",         "model",     "bucket_size",   "seed",         "steps",
    "micro_batches", "expect",    "reason",        "failing_check"};

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// YAML access with file:line:column errors.
class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const YAML::Mark m = at.Mark();
    std::ostringstream s;
    // A node the file does not hold (an empty document) has no place: blame its start.
    const int line = m.is_null() ? 0 : m.line, column = m.is_null() ? 0 : m.column;
    s << file_ << ":" << (line + 1) << ":" << (column + 1) << ": " << what;
    throw ScenarioError(s.str());
  }

  // Map keys of `node`, checked against `allowed`, no duplicates.
  void CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed,
                 const std::string& what) const {
    if (!node.IsMap()) Fail(node, what + ": expected a mapping");
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) Fail(it->first, what + ": keys must be plain words");
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        Fail(it->first,
             "unknown key '" + key + "' in " + what + " (expected one of: " + Join(allowed) + ")");
      if (!seen.insert(key).second) Fail(it->first, "duplicate key '" + key + "' in " + what);
      if (it->second.IsNull()) Fail(it->first, key + ": no value");
    }
  }

  template <typename T>
  T As(const YAML::Node& node, const std::string& key, const char* type) const {
    if (!node.IsScalar()) Fail(node, key + ": expected " + type);
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      const std::string& v = node.Scalar();
      const size_t digits = v.find_first_not_of("+-") == 1 ? 1 : 0;
      if (!v.empty() && v.size() > digits &&
          v.find_first_not_of("0123456789", digits) == std::string::npos)
        Fail(node, key + ": " + v + " is out of range");
      Fail(node, key + ": expected " + type + ", got '" + v + "'");
    }
  }
  int Int(const YAML::Node& n, const std::string& key) const {
    return As<int>(n, key, "an integer");
  }
  int64_t Int64(const YAML::Node& n, const std::string& key) const {
    return As<int64_t>(n, key, "an integer");
  }
  double Number(const YAML::Node& n, const std::string& key) const {
    if (n.IsScalar()) {
      errno = 0;
      char* end = nullptr;
      const double parsed = std::strtod(n.Scalar().c_str(), &end);
      if (end != n.Scalar().c_str() && *end == '\0' && (errno == ERANGE || !std::isfinite(parsed)))
        Fail(n, key + ": '" + n.Scalar() + "' is not a finite number");
    }
    const double v = As<double>(n, key, "a number");
    if (!std::isfinite(v)) Fail(n, key + ": expected a finite number");
    return v;
  }
  std::string Str(const YAML::Node& n, const std::string& key) const {
    std::string v = As<std::string>(n, key, "a string");
    if (v.find('\n') != std::string::npos)
      Fail(n, key + ": the value runs over a line break (a closing quote missing?)");
    return v;
  }

  // A scalar or a list of scalars, as a list of nodes.
  std::vector<YAML::Node> Items(const YAML::Node& n, const std::string& key) const {
    std::vector<YAML::Node> out;
    if (n.IsSequence()) {
      for (const auto& x : n) out.push_back(x);
      if (out.empty()) Fail(n, key + ": empty list");
    } else if (n.IsScalar() || n.IsMap()) {
      out.push_back(n);
    } else {
      Fail(n, key + ": expected a value or a list");
    }
    return out;
  }

 private:
  std::string file_;
};

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
    try {
      one.Resolve();
    } catch (const ScenarioError&) {
      throw;
    } catch (const Error& e) {
      p.Fail(key, std::string("optimizer: ") + e.what());
    }
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
  try {
    c.kind = ParseCheckKind(p.Str(n["kind"], "kind"));
  } catch (const ScenarioError&) {
    throw;
  } catch (const Error& e) {
    p.Fail(n["kind"], e.what());
  }
  try {
    c.on = ParseCheckOn(p.Str(n["on"], "on"));
  } catch (const ScenarioError&) {
    throw;
  } catch (const Error& e) {
    p.Fail(n["on"], e.what());
  }
  if (n["against"]) {
    try {
      c.against = ParseCheckAgainst(p.Str(n["against"], "against"));
    } catch (const ScenarioError&) {
      throw;
    } catch (const Error& e) {
      p.Fail(n["against"], e.what());
    }
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

// --- Dimensions -----------------------------------------------------------

// A value of the sharding-type axis: one of Megatron's four types, or dcp.
struct ShardingChoice {
  ShardingType type = ShardingType::kDpReshardable;
  bool dcp = false;
};

// Everything a cell is made from, each value with the node it came from.
struct Dimensions {
  int steps = 12;
  int micro_batches = 24;
  std::string backend = "gloo";
  GradReduction grad_reduction = GradReduction::kFp32;
  std::vector<std::pair<SystemSpec, YAML::Node>> systems;
  std::vector<std::pair<std::string, YAML::Node>> models;
  std::vector<std::string> dtypes = {"fp32"};
  std::vector<std::pair<ScenarioOptimizer, YAML::Node>> optimizers;
  std::vector<ShardingChoice> types;
  std::vector<std::pair<int, YAML::Node>> dps;
  std::vector<std::pair<std::optional<ResumePlan>, YAML::Node>> plans;
  std::vector<int64_t> buckets = {0};
  std::vector<uint64_t> seeds = {1};
  std::vector<std::pair<CheckSpec, YAML::Node>> checks;
  std::optional<ExpectedFailure> expect_fail;  // the top-level `expect: fail`
};

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
  try {
    return ParseSystem(p.Str(n, "system"));
  } catch (const ScenarioError&) {
    throw;
  } catch (const Error& e) {
    p.Fail(n, e.what());
  }
}

std::string ReadModel(const Parser& p, const YAML::Node& n) {
  const std::string model = p.Str(n, "model");
  try {
    if (model.rfind("oracle:", 0) == 0) {
      OracleModelByName(model.substr(7));
    } else if (model != "gpt-tiny" && model != "moe-tiny") {
      throw Error("unknown model '" + model +
                  "' (expected oracle:gpt-tiny, oracle:mixed-small, oracle:shapes:<list>, "
                  "oracle:sparse-<one of those>, gpt-tiny or moe-tiny)");
    }
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
      needs && ch.model.rfind("oracle:", 0) == 0) {
    const ModelSpec spec = OracleModelByName(ch.model.substr(7));
    if (!spec.HasMatrixParams())
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

// The first byte of `text` that is not UTF-8, or a control character YAML
// does not allow (other than tab, LF, CR), as "LINE:COLUMN: what"; "" if none.
std::string FirstBadByte(const std::string& text) {
  int line = 1, column = 1;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= text.size() && !(len == 2 && c < 0xC2);
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    const std::string where = std::to_string(line) + ":" + std::to_string(column) + ": ";
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", c);
    if (!ok) return where + "byte " + hex + " is not UTF-8 (scenario files are UTF-8 text)";
    if (len == 1 && (c < 0x20 || c == 0x7F) && c != '\t' && c != '\n' && c != '\r')
      return where + "control character " + hex + " (scenario files are text)";
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += len;
  }
  return "";
}

// Where a second YAML document starts (a null mark if there is none). It
// stops there: yaml-cpp 0.7's LoadAll never ends on some malformed inputs
// (",,,…" after a comment yields empty documents forever).
YAML::Mark SecondDocument(const std::string& text) {
  class Counter : public YAML::EventHandler {
   public:
    int documents = 0;
    YAML::Mark second = YAML::Mark::null_mark();
    void OnDocumentStart(const YAML::Mark& m) override {
      if (++documents == 2) second = m;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  } counter;
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (counter.documents < 2 && parser.HandleNextDocument(counter)) {
  }
  return counter.second;
}

// A hint for a syntax error on a line indented with a tab.
std::string TabHint(const std::string& text, int line) {
  std::istringstream in(text);
  std::string l;
  for (int i = 0; i <= line && std::getline(in, l); ++i) {
  }
  const std::string indent = l.substr(0, l.find_first_not_of(" \t"));
  return indent.find('\t') != std::string::npos
             ? " (a tab indents this line; YAML indents with spaces)"
             : "";
}

YAML::Node LoadYaml(const std::string& text, const std::string& path) {
  if (const std::string bad = FirstBadByte(text); !bad.empty())
    throw ScenarioError(path + ":" + bad);
  YAML::Node root;
  YAML::Mark second_document;
  try {
    second_document = SecondDocument(text);
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw ScenarioError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                        std::to_string(e.mark.column + 1) +
                        ": YAML syntax: lists or mappings nested too deep");
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                        std::to_string(e.mark.column + 1) + ": YAML syntax: " + e.msg +
                        TabHint(text, e.mark.line));
  } catch (const YAML::Exception& e) {
    throw ScenarioError(path + ":1:1: " + e.what());
  }
  if (!second_document.is_null())
    throw ScenarioError(path + ":" + std::to_string(second_document.line + 1) + ":" +
                        std::to_string(second_document.column + 1) +
                        ": a scenario file holds one YAML document");
  return root;
}

// A quote left open swallows the rest of the file into one value (YAML
// folds its lines), which then fails as a missing key far from the cause:
// refuse a quoted top-level value (but the description) not closed on its
// own line.
void CheckQuotesClosed(const Parser& p, const YAML::Node& root, const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Node v = it->second;  // a copy: `it->` yields a temporary
    if (it->first.Scalar() == "description" || !v.IsScalar() || v.Mark().is_null()) continue;
    const size_t line = static_cast<size_t>(v.Mark().line),
                 col = static_cast<size_t>(v.Mark().column);
    if (line >= lines.size() || col >= lines[line].size()) continue;
    const char quote = lines[line][col];
    if (quote != '"' && quote != '\'') continue;
    bool closed = false;
    for (size_t i = col + 1; i < lines[line].size() && !closed; ++i) {
      if (quote == '"' && lines[line][i] == '\\') {
        ++i;  // an escaped character
      } else if (lines[line][i] == quote) {
        if (quote == '\'' && i + 1 < lines[line].size() && lines[line][i + 1] == '\'') {
          ++i;  // '' is a quote inside single quotes
        } else {
          closed = true;
        }
      }
    }
    if (!closed)
      p.Fail(v, it->first.Scalar() + ": the quoted value is not closed on its line (a closing " +
                    "quote missing?)");
  }
}

// Resolves YAML merge keys ("<<: *base" or "<<: [*a, *b]") in place, as
// YAML 1.1 defines them: keys written beside "<<" win, and among several
// bases the first wins. The merged nodes are the originals, so errors keep
// their line:column. yaml-cpp reads "<<" as an ordinary key.
// `visited` holds the file positions of the collections done: an alias is
// the node it names, so each is walked once (an alias bomb stays cheap).
void ResolveMergeKeys(YAML::Node node, std::set<int>& visited) {
  if (!node.IsMap() && !node.IsSequence()) return;
  if (!visited.insert(node.Mark().pos).second) return;
  if (node.IsSequence()) {
    for (auto child : node) ResolveMergeKeys(child, visited);
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) ResolveMergeKeys(it->second, visited);
  const YAML::Node merge = node["<<"];
  if (!merge) return;
  std::vector<YAML::Node> bases;
  if (merge.IsSequence()) {
    for (const auto& b : merge) bases.push_back(b);
  } else {
    bases.push_back(merge);
  }
  const YAML::Node& lookup = node;  // const: a lookup must not add the key
  for (const YAML::Node& base : bases) {
    if (!base.IsMap()) continue;  // CheckKeys then names "<<" as an unknown key
    for (auto it = base.begin(); it != base.end(); ++it)
      if (!lookup[it->first.Scalar()]) node.force_insert(it->first, it->second);
  }
  node.remove("<<");
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
