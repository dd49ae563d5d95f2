#include "harness/cell/train_result_json.h"

#include <map>

#include "harness/cell/run_files.h"
#include "spec/error.h"

namespace shardcheck {

nlohmann::ordered_json LayoutJson(const DistributedOptimizer& opt) {
  const BufferLayout& l = opt.layout();
  nlohmann::ordered_json j;
  j["dp"] = l.dp();
  j["bucket_size"] = l.bucket_size();
  j["numel"] = l.numel();
  j["buckets"] = nlohmann::ordered_json::array();
  for (const Bucket& b : l.buckets())
    j["buckets"].push_back({{"begin", b.world.begin},
                            {"end", b.world.end},
                            {"numel_unpadded", b.numel_unpadded},
                            {"shard", b.ShardSize(l.dp())},
                            {"params", b.params.size()}});
  std::map<int, int> ranks_per_param;
  for (int r = 0; r < l.dp(); ++r)
    for (const OwnedSlice& s : l.SlicesOf(r)) ++ranks_per_param[s.param];
  int straddling = 0;
  for (const auto& [p, n] : ranks_per_param) straddling += n > 1;
  j["straddling_params"] = straddling;
  int64_t smallest = -1;
  for (const PlacedParam& p : l.params())
    smallest = smallest < 0 ? p.numel : std::min(smallest, p.numel);
  j["smallest_param_numel"] = smallest;
  j["layer_wise_owners"] = nlohmann::ordered_json::object();
  for (const auto& [param, owner] : opt.layer_wise_owners())
    j["layer_wise_owners"][opt.params()[static_cast<size_t>(param)].name] = owner;
  return j;
}

nlohmann::ordered_json TrainResultJson(const TrainOptions& opts, int dp, const TrainResult& r) {
  nlohmann::ordered_json j;
  j["format"] = "shardcheck-train-result/1";
  j["config"] = RunConfigJson(opts.run, r.steps.empty() ? 0 : r.steps.back().step);
  j["config"]["dp"] = dp;
  j["config"]["bucket_size"] = opts.bucket_size;
  j["compared_with_reference"] = r.compared;
  j["resumed_from"] = r.resumed_from;
  if (!opts.load_dir.empty()) j["loaded_from"] = opts.load_dir;
  if (opts.save_at > 0)
    j["saved"] = {{"step", opts.save_at},
                  {"dir", opts.save_dir},
                  {"sharding_type", ShardingTypeName(opts.sharding_type)}};
  j["verdict"] = !r.compared ? "not_compared" : (r.ok ? "pass" : "fail");
  j["grad_reduction"] = GradReductionName(opts.run.grad_reduction);
  if (opts.run.grad_reduction == GradReduction::kExact)
    j["grad_grid"] = {{"below_unit", r.grad_below_unit}, {"nonzero", r.grad_nonzero}};
  j["steps"] = nlohmann::ordered_json::array();
  for (const auto& s : r.steps) {
    nlohmann::ordered_json js;
    js["step"] = s.step;
    js["grad_norm"] = s.grad_norm;
    if (!s.after_load && !std::isnan(s.reference_grad_norm)) {
      js["reference_grad_norm"] = s.reference_grad_norm;
      js["gradient_norm"] = s.gradient_norm;
    }
    if (!s.after_load) js["lr"] = s.lr;
    if (!std::isnan(s.loss)) js["loss"] = s.loss;
    if (s.after_load) js["after_load"] = true;
    for (const auto& g : s.groups)
      js["groups"][g.group] = {{"mismatches", g.mismatches}, {"tol_violations", g.tol_violations},
                               {"max_abs_diff", g.max_abs},  {"max_rel_diff", g.max_rel},
                               {"max_ulp", g.max_ulp},       {"sign_changes", g.sign_changes}};
    j["steps"].push_back(js);
  }
  if (r.first_mismatch) {
    j["first_mismatch"] = {{"step", r.first_mismatch->step},
                           {"rank", r.first_mismatch->rank},
                           {"tensor", r.first_mismatch->tensor},
                           {"detail", r.first_mismatch->detail}};
  } else {
    j["first_mismatch"] = nullptr;
  }
  j["layout"] = r.layout;
  j["memory"] = MemoryJson(r.memory);
  return j;
}

TrainResult TrainResultFromJson(const nlohmann::ordered_json& j) {
  try {
    if (j.at("format") != "shardcheck-train-result/1")
      throw Error("format " + j.at("format").dump() + " is not shardcheck-train-result/1");
    TrainResult r;
    r.compared = j.at("compared_with_reference").get<bool>();
    r.resumed_from = j.at("resumed_from").get<int64_t>();
    r.ok = j.at("verdict") != "fail";
    if (j.contains("grad_grid")) {
      r.grad_below_unit = j["grad_grid"].at("below_unit").get<int64_t>();
      r.grad_nonzero = j["grad_grid"].at("nonzero").get<int64_t>();
    }
    for (const auto& js : j.at("steps")) {
      StepRecord s;
      s.step = js.at("step").get<int64_t>();
      s.grad_norm = js.at("grad_norm").get<double>();
      s.after_load = js.value("after_load", false);
      s.lr = js.value("lr", 0.0);
      s.loss =
          js.contains("loss") ? js["loss"].get<double>() : std::numeric_limits<double>::quiet_NaN();
      if (js.contains("groups"))
        for (const auto& [group, g] : js["groups"].items())
          s.groups.push_back(
              {group, g.at("mismatches").get<int64_t>(), g.at("tol_violations").get<int64_t>(),
               g.at("max_abs_diff").get<double>(), g.at("max_rel_diff").get<double>(),
               g.at("max_ulp").get<int64_t>(), g.value("sign_changes", int64_t{0})});
      r.steps.push_back(std::move(s));
    }
    if (!j.at("first_mismatch").is_null()) {
      const auto& f = j["first_mismatch"];
      r.first_mismatch =
          FirstMismatch{f.at("step").get<int64_t>(), f.at("rank").get<int>(),
                        f.at("tensor").get<std::string>(), f.at("detail").get<std::string>()};
    }
    r.layout = j.at("layout");
    for (const auto& e : j.at("memory")) {
      MemoryFigures m;
      m.owned_elements = e.at("owned_elements").get<int64_t>();
      m.total_bytes = e.at("total_bytes").get<int64_t>();
      for (const auto& x : e.at("entries"))
        m.entries.push_back({x.at("child").get<std::string>(), x.at("key").get<std::string>(),
                             x.at("elements").get<int64_t>(), x.at("bytes").get<int64_t>()});
      r.memory.push_back(std::move(m));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("train result: ") + e.what());
  }
}

nlohmann::ordered_json MemoryJson(const std::vector<MemoryFigures>& memory) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t rank = 0; rank < memory.size(); ++rank) {
    const MemoryFigures& m = memory[rank];
    nlohmann::ordered_json e;
    e["rank"] = rank;
    e["owned_elements"] = m.owned_elements;
    e["total_bytes"] = m.total_bytes;
    e["entries"] = nlohmann::ordered_json::array();
    for (const auto& x : m.entries)
      e["entries"].push_back(
          {{"child", x.child}, {"key", x.key}, {"elements", x.elements}, {"bytes", x.bytes}});
    out.push_back(e);
  }
  return out;
}

}  // namespace shardcheck
