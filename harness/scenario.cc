#include "harness/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "harness/cli_options.h"
#include "harness/model_spec.h"

namespace shardcheck {

std::string CheckSpec::Name() const { return kind + "-" + on; }

std::vector<std::string> Cell::Labels() const {
  std::vector<std::string> l = {"checkpoint", optimizer.setup.name, ShardingTypeName(sharding_type),
                                "dp" + std::to_string(dp), dtype};
  if (resume && resume->dp != dp) l.push_back("dp" + std::to_string(resume->dp));
  l.push_back(RealModel() ? model : "oracle");
  return l;
}

namespace {

const std::vector<std::string> kTopKeys = {
    "name",        "description", "model",   "dtype",         "optimizer", "sharding_type",
    "dp",          "resume",      "steps",   "bucket_size",   "seed",      "micro_batches",
    "backend",     "checks",      "exclude", "include"};
const std::vector<std::string> kOptimizerKeys = {
    "name", "label", "lr", "weight_decay", "beta1", "beta2", "eps", "momentum", "nesterov",
    "ns_steps", "ns_coefficients", "scale_mode", "extra_scale", "ns_bf16", "scalar_lr",
    "scalar_weight_decay", "max_grad_norm"};
const std::vector<std::string> kResumeKeys = {"save_at", "dp", "bucket_size"};
const std::vector<std::string> kCheckKeys = {"kind", "on", "atol", "rtol", "max_ulp", "min_fall"};
const std::vector<std::string> kMatchKeys = {"optimizer", "sharding_type", "dp", "resume_dp",
                                             "dtype", "model", "bucket_size", "seed"};

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const YAML::Mark m = at.Mark();
    std::ostringstream s;
    s << file_ << ":" << (m.line + 1) << ":" << (m.column + 1) << ": " << what;
    throw ScenarioError(s.str());
  }

  // Map keys of `node`, checked against `allowed`, no duplicates.
  void CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed, const std::string& what) const {
    if (!node.IsMap()) Fail(node, what + ": expected a mapping");
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) Fail(it->first, what + ": keys must be plain words");
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        Fail(it->first, "unknown key '" + key + "' in " + what + " (expected one of: " + Join(allowed) + ")");
      if (!seen.insert(key).second) Fail(it->first, "duplicate key '" + key + "' in " + what);
    }
  }

  template <typename T>
  T As(const YAML::Node& node, const std::string& key, const char* type) const {
    if (!node.IsScalar()) Fail(node, key + ": expected " + type);
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      Fail(node, key + ": expected " + type + ", got '" + node.Scalar() + "'");
    }
  }
  int Int(const YAML::Node& n, const std::string& key) const { return As<int>(n, key, "an integer"); }
  int64_t Int64(const YAML::Node& n, const std::string& key) const { return As<int64_t>(n, key, "an integer"); }
  double Number(const YAML::Node& n, const std::string& key) const {
    const double v = As<double>(n, key, "a number");
    if (!std::isfinite(v)) Fail(n, key + ": expected a finite number");
    return v;
  }
  std::string Str(const YAML::Node& n, const std::string& key) const { return As<std::string>(n, key, "a string"); }
  bool Bool(const YAML::Node& n, const std::string& key) const { return As<bool>(n, key, "true or false"); }

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

  OptimizerEntry Optimizer(const YAML::Node& n) const {
    OracleCliOptions o;
    std::string label;
    if (n.IsScalar()) {
      o.optimizer = Str(n, "optimizer");
    } else {
      CheckKeys(n, kOptimizerKeys, "optimizer");
      if (!n["name"]) Fail(n, "optimizer: missing key 'name' (adam, adamw, lion, muon_adam, muon_lion)");
      o.optimizer = Str(n["name"], "optimizer.name");
      if (n["label"]) label = Str(n["label"], "optimizer.label");
      if (n["lr"]) o.lr = Number(n["lr"], "lr");
      if (n["weight_decay"]) o.weight_decay = Number(n["weight_decay"], "weight_decay");
      if (n["beta1"]) o.beta1 = Number(n["beta1"], "beta1");
      if (n["beta2"]) o.beta2 = Number(n["beta2"], "beta2");
      if (n["eps"]) o.eps = Number(n["eps"], "eps");
      if (n["momentum"]) o.momentum = Number(n["momentum"], "momentum");
      if (n["nesterov"]) o.nesterov = Bool(n["nesterov"], "nesterov");
      if (n["ns_steps"]) o.ns_steps = Int(n["ns_steps"], "ns_steps");
      if (n["ns_coefficients"]) o.ns_coefficients = Str(n["ns_coefficients"], "ns_coefficients");
      if (n["scale_mode"]) o.scale_mode = Str(n["scale_mode"], "scale_mode");
      if (n["extra_scale"]) o.extra_scale = Number(n["extra_scale"], "extra_scale");
      if (n["ns_bf16"]) o.ns_bf16 = Bool(n["ns_bf16"], "ns_bf16");
      if (n["scalar_lr"]) o.scalar_lr = Number(n["scalar_lr"], "scalar_lr");
      if (n["scalar_weight_decay"]) o.scalar_weight_decay = Number(n["scalar_weight_decay"], "scalar_weight_decay");
      if (n["max_grad_norm"]) o.max_grad_norm = Number(n["max_grad_norm"], "max_grad_norm");
    }
    OptimizerEntry e;
    try {
      // Reuse the CLI's resolution (defaults, overrides, validation) on a tiny model.
      o.shapes = "w=4x4";
      e.setup = o.Resolve().setup;
    } catch (const Error& err) {
      std::string msg = err.what();
      if (msg.find("needs a 2-D hidden weight") != std::string::npos) {
        // Resolved again per cell with the real model.
      } else {
        Fail(n, std::string("optimizer: ") + msg);
      }
    }
    e.label = label.empty() ? o.optimizer : label;
    return e;
  }

  CheckSpec Check(const YAML::Node& n) const {
    CheckKeys(n, kCheckKeys, "check");
    CheckSpec c;
    if (!n["kind"]) Fail(n, "check: missing key 'kind' (bitwise, tolerance or loss_continuity)");
    if (!n["on"]) Fail(n, "check: missing key 'on' (params, main_params, state or loss)");
    c.kind = Str(n["kind"], "kind");
    c.on = Str(n["on"], "on");
    if (c.kind != "bitwise" && c.kind != "tolerance" && c.kind != "loss_continuity" && c.kind != "loss_fall")
      Fail(n["kind"], "check kind '" + c.kind + "' (expected bitwise, tolerance, loss_continuity or loss_fall)");
    if (c.on != "params" && c.on != "main_params" && c.on != "state" && c.on != "loss")
      Fail(n["on"], "check on '" + c.on + "' (expected params, main_params, state or loss)");
    if ((c.kind == "loss_continuity" || c.kind == "loss_fall") && c.on != "loss")
      Fail(n, "check: " + c.kind + " goes with on: loss");
    if (n["min_fall"]) {
      if (c.kind != "loss_fall") Fail(n["min_fall"], "check: min_fall belongs to kind loss_fall");
      c.min_fall = Number(n["min_fall"], "min_fall");
      if (c.min_fall <= 0 || c.min_fall >= 1) Fail(n["min_fall"], "min_fall must be in (0, 1)");
    }
    if (c.kind == "loss_fall") {
      if (c.min_fall == 0) Fail(n, "check: loss_fall needs min_fall (e.g. 0.3 for a 30% fall)");
      return c;
    }
    if (c.kind == "bitwise" && c.on == "loss")
      Fail(n, "check: losses are compared with tolerance or loss_continuity, not bitwise (a bitwise "
              "same-DP resume check on params covers the losses too)");
    if (n["atol"]) c.atol = Number(n["atol"], "atol");
    if (n["rtol"]) c.rtol = Number(n["rtol"], "rtol");
    if (n["max_ulp"]) c.max_ulp = Int64(n["max_ulp"], "max_ulp");
    if (c.atol < 0 || c.rtol < 0) Fail(n, "check: atol and rtol must be >= 0");
    if (c.kind == "bitwise" && (c.atol > 0 || c.rtol > 0 || c.max_ulp > 0))
      Fail(n, "check: a bitwise check takes no tolerance");
    if (c.kind != "bitwise" && c.atol == 0 && c.rtol == 0 && c.max_ulp < 0)
      Fail(n, "check: a " + c.kind + " check needs atol, rtol or max_ulp (else use kind: bitwise)");
    return c;
  }

 private:
  std::string file_;
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
    s = "oracle-shapes-" + std::string(buf);
  }
  return s;
}

}  // namespace

Scenario LoadScenario(const std::string& path) {
  if (!std::filesystem::exists(path)) throw ScenarioError(path + ": no such scenario file");
  Parser p(path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                        std::to_string(e.mark.column + 1) + ": YAML syntax: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(path + ": " + e.what());
  }
  if (!root.IsMap()) p.Fail(root, "a scenario is a mapping of keys (name, model, optimizer, ...)");
  p.CheckKeys(root, kTopKeys, "scenario");
  for (const char* required : {"name", "model", "optimizer", "sharding_type", "dp"})
    if (!root[required]) p.Fail(root, std::string("missing key '") + required + "'");

  Scenario sc;
  sc.file = path;
  sc.name = p.Str(root["name"], "name");
  if (root["description"]) sc.description = p.Str(root["description"], "description");
  const int steps = root["steps"] ? p.Int(root["steps"], "steps") : 12;
  if (steps < 1 || steps > 100000) p.Fail(root["steps"], "steps must be in [1, 100000]");
  const int m = root["micro_batches"] ? p.Int(root["micro_batches"], "micro_batches") : 24;
  if (m < 1 || m > 32) p.Fail(root["micro_batches"], "micro_batches must be in [1, 32] (the oracle's sums stay exact up to 32)");
  std::string backend = "gloo";
  if (root["backend"]) {
    backend = p.Str(root["backend"], "backend");
    if (backend != "gloo" && backend != "nccl" && backend != "auto")
      p.Fail(root["backend"], "backend '" + backend + "' (expected gloo, nccl or auto)");
  }

  // Dimensions, each with the node it came from (for errors).
  std::vector<std::pair<std::string, YAML::Node>> models;
  for (const auto& n : p.Items(root["model"], "model")) {
    const std::string model = p.Str(n, "model");
    try {
      if (model.rfind("oracle:", 0) == 0) {
        const std::string rest = model.substr(7);
        if (rest.rfind("shapes:", 0) == 0) ParseShapes(rest.substr(7));
        else ModelByName(rest);
      } else if (model != "gpt-tiny" && model != "moe-tiny") {
        throw Error("unknown model '" + model + "' (expected oracle:gpt-tiny, oracle:shapes:<list>, gpt-tiny or moe-tiny)");
      }
    } catch (const Error& e) {
      p.Fail(n, e.what());
    }
    models.push_back({model, n});
  }
  std::vector<std::string> dtypes = {"fp32"};
  if (root["dtype"]) {
    dtypes.clear();
    for (const auto& n : p.Items(root["dtype"], "dtype")) {
      const std::string d = p.Str(n, "dtype");
      if (d != "fp32" && d != "bf16") p.Fail(n, "dtype '" + d + "' (expected fp32 or bf16)");
      dtypes.push_back(d);
    }
  }
  std::vector<std::pair<OptimizerEntry, YAML::Node>> optimizers;
  for (const auto& n : p.Items(root["optimizer"], "optimizer")) optimizers.push_back({p.Optimizer(n), n});
  std::vector<ShardingType> types;
  for (const auto& n : p.Items(root["sharding_type"], "sharding_type")) {
    try {
      types.push_back(ParseShardingType(p.Str(n, "sharding_type")));
    } catch (const ScenarioError&) {
      throw;
    } catch (const Error& e) {
      p.Fail(n, e.what());
    }
  }
  std::vector<std::pair<int, YAML::Node>> dps;
  for (const auto& n : p.Items(root["dp"], "dp")) {
    const int dp = p.Int(n, "dp");
    if (dp < 1 || dp > 1024) p.Fail(n, "dp must be in [1, 1024]");
    if (m % dp != 0) p.Fail(n, "dp " + std::to_string(dp) + " does not divide micro_batches " + std::to_string(m));
    dps.push_back({dp, n});
  }
  std::vector<std::pair<std::optional<ResumePlan>, YAML::Node>> plans = {{std::nullopt, root}};
  if (root["resume"]) {
    plans.clear();
    for (const auto& n : p.Items(root["resume"], "resume")) {
      if (n.IsScalar()) {
        if (n.Scalar() != "none") p.Fail(n, "resume: expected 'none' or {save_at: K, dp: N|same}");
        plans.push_back({std::nullopt, n});
        continue;
      }
      p.CheckKeys(n, kResumeKeys, "resume plan");
      if (!n["save_at"]) p.Fail(n, "resume plan: missing key 'save_at'");
      ResumePlan plan;
      plan.save_at = p.Int(n["save_at"], "save_at");
      if (plan.save_at < 1 || plan.save_at >= steps)
        p.Fail(n["save_at"], "save_at " + std::to_string(plan.save_at) + " must be in [1, steps - 1] = [1, " +
                                 std::to_string(steps - 1) + "]");
      if (n["dp"] && !(n["dp"].IsScalar() && n["dp"].Scalar() == "same")) {
        plan.dp = p.Int(n["dp"], "resume dp");
        if (plan.dp < 1) p.Fail(n["dp"], "resume dp must be >= 1 (or 'same')");
        if (m % plan.dp != 0)
          p.Fail(n["dp"], "resume dp " + std::to_string(plan.dp) + " does not divide micro_batches " + std::to_string(m));
      }
      if (n["bucket_size"]) plan.bucket_size = p.Int64(n["bucket_size"], "resume bucket_size");
      plans.push_back({plan, n});
    }
  }
  std::vector<int64_t> buckets = {0};
  if (root["bucket_size"]) {
    buckets.clear();
    for (const auto& n : p.Items(root["bucket_size"], "bucket_size")) {
      const int64_t b = p.Int64(n, "bucket_size");
      if (b < 0) p.Fail(n, "bucket_size must be >= 0 (0: one bucket)");
      buckets.push_back(b);
    }
  }
  std::vector<uint64_t> seeds = {1};
  if (root["seed"]) {
    seeds.clear();
    for (const auto& n : p.Items(root["seed"], "seed")) {
      const int64_t s = p.Int64(n, "seed");
      if (s < 0) p.Fail(n, "seed must be >= 0");
      seeds.push_back(static_cast<uint64_t>(s));
    }
  }
  std::vector<std::pair<CheckSpec, YAML::Node>> checks;
  if (root["checks"]) {
    if (!root["checks"].IsSequence()) p.Fail(root["checks"], "checks: expected a list of {kind, on, ...}");
    for (const auto& n : root["checks"]) checks.push_back({p.Check(n), n});
  }
  const int line = static_cast<int>(root.Mark().line) + 1;

  // Cross product.
  auto make_cell = [&](const std::string& model, const YAML::Node& model_node, const std::string& dtype,
                       const OptimizerEntry& opt, const YAML::Node& opt_node, ShardingType type, int dp,
                       const std::optional<ResumePlan>& plan_in, const YAML::Node& plan_node, int64_t bucket,
                       uint64_t seed, int cell_line) {
    Cell c;
    c.scenario = sc.name;
    c.file = path;
    c.line = cell_line;
    c.model = model;
    c.dtype = dtype;
    c.optimizer = opt;
    c.sharding_type = type;
    c.dp = dp;
    c.steps = steps;
    c.bucket_size = bucket;
    c.seed = seed;
    c.micro_batches = m;
    c.backend = backend;
    c.resume = plan_in;
    if (c.resume && c.resume->dp == 0) c.resume->dp = dp;
    // Muon needs a 2-D hidden weight.
    if (opt.setup.IsMuon() && model.rfind("oracle:", 0) == 0) {
      const std::string rest = model.substr(7);
      const ModelSpec spec = rest.rfind("shapes:", 0) == 0 ? ParseShapes(rest.substr(7)) : ModelByName(rest);
      if (!spec.HasMuonParams())
        p.Fail(opt_node, "optimizer " + opt.label + " needs a 2-D hidden weight, and model " + model + " has none");
    }
    (void)model_node;
    // The type must allow the plan's layout change.
    if (c.resume && c.resume->bucket_size && *c.resume->bucket_size != bucket &&
        (type == ShardingType::kDpReshardable || type == ShardingType::kDpZeroGatherScatter))
      p.Fail(plan_node, "sharding type " + ShardingTypeName(type) +
                            " cannot change the bucket size on resume (only the DP size); use "
                            "fully_reshardable or fully_sharded_model_space");
    // Checks: given, or the defaults of the model kind.
    for (const auto& [check, node] : checks) {
      if (check.on == "loss" && !c.RealModel())
        p.Fail(node, "a loss check needs a real model (gpt-tiny or moe-tiny); oracle runs have no loss");
      if (check.kind == "loss_continuity" && !c.resume) continue;  // nothing to continue
      c.checks.push_back(check);
    }
    if (checks.empty()) {
      if (!c.RealModel()) {
        c.checks = {{"bitwise", "params"}, {"bitwise", "main_params"}, {"bitwise", "state"}};
      } else {
        // docs/scenarios.md, "Default checks": params within a tolerance of the
        // reference, except for sign-based Lion (a rounding difference in a
        // gradient near zero flips a sign and moves that element by 2 lr), whose
        // agreement is judged on the loss.
        const bool bf16 = dtype == "bf16";
        const bool sign_based = opt.setup.main.kind == OptimizerKind::kLion ||
                                (opt.setup.scalar && opt.setup.scalar->kind == OptimizerKind::kLion);
        if (!sign_based) c.checks.push_back({"tolerance", "params", bf16 ? 1e-2 : 1e-3, bf16 ? 1e-2 : 1e-2, -1});
        c.checks.push_back({"tolerance", "loss", 0.0, bf16 ? 1e-2 : 1e-4, -1});
        if (c.resume) {
          c.checks.push_back({"bitwise", "params"});
          c.checks.push_back({"loss_continuity", "loss", 0.0, bf16 ? 1e-2 : 1e-4, -1});
        }
      }
    }
    // The id.
    std::string id = opt.label + "." + ShardingTypeName(type) + ".dp" + std::to_string(dp);
    if (c.resume) {
      id += (c.resume->dp == dp ? "-resume@" : "-to-dp" + std::to_string(c.resume->dp) + "@") +
            std::to_string(c.resume->save_at);
      if (c.resume->bucket_size) id += "-bs" + std::to_string(*c.resume->bucket_size);
    }
    id += "." + dtype + "." + ModelId(model);
    if (buckets.size() > 1) id += ".bs" + std::to_string(bucket);
    if (seeds.size() > 1) id += ".seed" + std::to_string(seed);
    c.id = id;
    return c;
  };

  // Excludes: each a mapping of dimension -> value or list; a cell is dropped
  // when every given dimension matches.
  struct Match {
    std::map<std::string, std::vector<std::string>> values;
  };
  auto read_match = [&](const YAML::Node& n, const std::string& what) {
    p.CheckKeys(n, kMatchKeys, what);
    Match mt;
    for (auto it = n.begin(); it != n.end(); ++it)
      for (const auto& v : p.Items(it->second, it->first.Scalar())) mt.values[it->first.Scalar()].push_back(p.Str(v, it->first.Scalar()));
    return mt;
  };
  auto value_of = [](const Cell& c, const std::string& key) -> std::string {
    if (key == "optimizer") return c.optimizer.label;
    if (key == "sharding_type") return ShardingTypeName(c.sharding_type);
    if (key == "dp") return std::to_string(c.dp);
    if (key == "resume_dp") return c.resume ? std::to_string(c.resume->dp) : "none";
    if (key == "dtype") return c.dtype;
    if (key == "model") return c.model;
    if (key == "bucket_size") return std::to_string(c.bucket_size);
    if (key == "seed") return std::to_string(c.seed);
    return "";
  };
  std::vector<Match> excludes;
  if (root["exclude"]) {
    if (!root["exclude"].IsSequence()) p.Fail(root["exclude"], "exclude: expected a list of mappings");
    for (const auto& n : root["exclude"]) excludes.push_back(read_match(n, "exclude entry"));
  }
  auto excluded = [&](const Cell& c) {
    for (const Match& mt : excludes) {
      bool all = true;
      for (const auto& [key, vals] : mt.values)
        all = all && std::find(vals.begin(), vals.end(), value_of(c, key)) != vals.end();
      if (all) return true;
    }
    return false;
  };

  std::set<std::string> ids;
  auto add = [&](Cell c, const YAML::Node& at) {
    if (excluded(c)) return;
    (void)at;
    // Overlapping plans (e.g. `dp: same` and `dp: 2` on a dp-2 cell) give the
    // same cell twice; it runs once.
    if (!ids.insert(c.id).second) return;
    sc.cells.push_back(std::move(c));
  };
  for (const auto& [model, mn] : models)
    for (const auto& dtype : dtypes)
      for (const auto& [opt, on] : optimizers)
        for (ShardingType t : types)
          for (const auto& [dp, dn] : dps)
            for (const auto& [plan, pn] : plans)
              for (int64_t b : buckets)
                for (uint64_t s : seeds) add(make_cell(model, mn, dtype, opt, on, t, dp, plan, pn, b, s, line), root);

  // Includes: each entry one more cell; unspecified dimensions take the
  // scenario's first value.
  if (root["include"]) {
    if (!root["include"].IsSequence()) p.Fail(root["include"], "include: expected a list of mappings");
    for (const auto& n : root["include"]) {
      p.CheckKeys(n, {"optimizer", "sharding_type", "dp", "resume", "dtype", "model", "bucket_size", "seed",
                      "steps", "micro_batches"},
                  "include entry");
      const int inc_steps = n["steps"] ? p.Int(n["steps"], "steps") : steps;
      if (inc_steps < 1) p.Fail(n["steps"], "steps must be >= 1");
      const int inc_m = n["micro_batches"] ? p.Int(n["micro_batches"], "micro_batches") : m;
      if (inc_m < 1 || inc_m > 32) p.Fail(n["micro_batches"], "micro_batches must be in [1, 32]");
      std::string model = models[0].first;
      if (n["model"]) model = p.Str(n["model"], "model");
      std::string dtype = n["dtype"] ? p.Str(n["dtype"], "dtype") : dtypes[0];
      if (dtype != "fp32" && dtype != "bf16") p.Fail(n["dtype"], "dtype '" + dtype + "' (expected fp32 or bf16)");
      OptimizerEntry opt = n["optimizer"] ? p.Optimizer(n["optimizer"]) : optimizers[0].first;
      ShardingType t = types[0];
      if (n["sharding_type"]) {
        try {
          t = ParseShardingType(p.Str(n["sharding_type"], "sharding_type"));
        } catch (const ScenarioError&) {
          throw;
        } catch (const Error& e) {
          p.Fail(n["sharding_type"], e.what());
        }
      }
      const int dp = n["dp"] ? p.Int(n["dp"], "dp") : dps[0].first;
      if (dp < 1 || inc_m % dp != 0)
        p.Fail(n["dp"] ? n["dp"] : n, "dp " + std::to_string(dp) + " does not divide micro_batches " + std::to_string(inc_m));
      std::optional<ResumePlan> plan;
      if (n["resume"]) {
        const YAML::Node r = n["resume"];
        p.CheckKeys(r, kResumeKeys, "resume plan");
        plan = ResumePlan{};
        plan->save_at = p.Int(r["save_at"], "save_at");
        if (plan->save_at < 1 || plan->save_at >= inc_steps) p.Fail(r["save_at"], "save_at must be in [1, steps - 1]");
        if (r["dp"] && !(r["dp"].IsScalar() && r["dp"].Scalar() == "same")) plan->dp = p.Int(r["dp"], "resume dp");
        if (plan->dp != 0 && inc_m % plan->dp != 0) p.Fail(r["dp"], "resume dp does not divide micro_batches");
        if (r["bucket_size"]) plan->bucket_size = p.Int64(r["bucket_size"], "resume bucket_size");
      }
      const int64_t b = n["bucket_size"] ? p.Int64(n["bucket_size"], "bucket_size") : buckets[0];
      const uint64_t s = n["seed"] ? static_cast<uint64_t>(p.Int64(n["seed"], "seed")) : seeds[0];
      Cell c = make_cell(model, n, dtype, opt, n, t, dp, plan, n, b, s, static_cast<int>(n.Mark().line) + 1);
      c.steps = inc_steps;
      c.micro_batches = inc_m;
      add(std::move(c), n);
    }
  }
  if (sc.cells.empty()) p.Fail(root, "the matrix is empty after exclude");
  return sc;
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
    const std::string key = term.substr(0, eq), val = term.substr(eq + 1);
    std::string have;
    if (key == "id") have = c.id;
    else if (key == "optimizer") have = c.optimizer.label;
    else if (key == "sharding_type") have = ShardingTypeName(c.sharding_type);
    else if (key == "dp") have = std::to_string(c.dp);
    else if (key == "resume_dp") have = c.resume ? std::to_string(c.resume->dp) : "none";
    else if (key == "dtype") have = c.dtype;
    else if (key == "model") have = c.model;
    else if (key == "scenario") have = c.scenario;
    else throw Error("--filter: unknown key '" + key + "' (id, optimizer, sharding_type, dp, resume_dp, dtype, model, scenario)");
    if (have != val) return false;
  }
  return true;
}

}  // namespace shardcheck
