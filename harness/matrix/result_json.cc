#include "harness/matrix/result_json.h"

#include <cmath>

#include "spec/config_json.h"

namespace shardcheck {

nlohmann::ordered_json Num(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json RunJson(const TrainResult& r, int dp,
                               const std::vector<std::string>& groups) {
  nlohmann::ordered_json j;
  j["dp"] = dp;
  j["steps"] = nlohmann::ordered_json::array();
  j["after_load"] = nlohmann::ordered_json::array();
  j["loss"] = nlohmann::ordered_json::array();
  j["grad_norm"] = nlohmann::ordered_json::array();
  j["lr"] = nlohmann::ordered_json::array();
  for (const auto& g : groups)
    j["diff"][g] = {{"max_abs", nlohmann::ordered_json::array()},
                    {"max_rel", nlohmann::ordered_json::array()},
                    {"max_ulp", nlohmann::ordered_json::array()},
                    {"mismatches", nlohmann::ordered_json::array()},
                    {"tol_violations", nlohmann::ordered_json::array()},
                    {"sign_changes", nlohmann::ordered_json::array()}};
  bool any_loss = false;
  for (const auto& s : r.steps) {
    j["steps"].push_back(s.step);
    j["after_load"].push_back(s.after_load);
    j["loss"].push_back(Num(s.loss));
    any_loss = any_loss || std::isfinite(s.loss);
    j["grad_norm"].push_back(s.after_load ? nlohmann::ordered_json(nullptr) : Num(s.grad_norm));
    j["lr"].push_back(s.after_load ? nlohmann::ordered_json(nullptr) : Num(s.lr));
    for (const auto& g : s.groups) {
      auto& d = j["diff"][g.group];
      d["max_abs"].push_back(g.max_abs);
      d["max_rel"].push_back(g.max_rel);
      d["max_ulp"].push_back(g.max_ulp);
      d["mismatches"].push_back(g.mismatches);
      d["tol_violations"].push_back(g.tol_violations);
      d["sign_changes"].push_back(g.sign_changes);
    }
  }
  if (!any_loss) j["loss"] = nullptr;
  // The exact reduction's grid (docs/models.md): gradient elements lost below one unit.
  if (r.grad_nonzero > 0)
    j["grad_grid"] = {{"below_unit", r.grad_below_unit}, {"nonzero", r.grad_nonzero}};
  return j;
}

nlohmann::ordered_json ReferenceJson(const ReferenceTrajectory& reference, bool has_loss) {
  nlohmann::ordered_json j;
  j["dp"] = 1;
  j["steps"] = nlohmann::ordered_json::array();
  j["loss"] = has_loss ? nlohmann::ordered_json::array() : nlohmann::ordered_json(nullptr);
  j["grad_norm"] = nlohmann::ordered_json::array();
  j["lr"] = nlohmann::ordered_json::array();
  for (int64_t s = 1; s <= reference.steps(); ++s) {
    const size_t i = static_cast<size_t>(s - 1);
    j["steps"].push_back(s);
    if (has_loss) j["loss"].push_back(Num(reference.loss[i]));
    j["grad_norm"].push_back(Num(reference.grad_norm[i]));
    j["lr"].push_back(Num(reference.lr[i]));
  }
  return j;
}

nlohmann::ordered_json CellConfigJson(const Cell& cell) {
  nlohmann::ordered_json cfg;
  cfg["system"] = cell.system.Name();
  cfg["model"] = cell.model;
  cfg["dtype"] = cell.dtype;
  cfg["steps"] = cell.steps;
  cfg["seed"] = cell.seed;
  cfg["micro_batches"] = cell.micro_batches;
  cfg["bucket_size"] = cell.bucket_size;
  cfg["backend"] = cell.backend;
  cfg["grad_reduction"] = GradReductionName(cell.grad_reduction);
  cfg["sharding_type"] = cell.ShardingName();
  cfg["dp"] = cell.dp;
  cfg["resume"] = nullptr;
  if (cell.resume) {
    const auto& b = cell.resume->bucket_size;
    cfg["resume"] = {{"save_at", cell.resume->save_at},
                     {"dp", cell.resume->dp},
                     {"bucket_size", b ? nlohmann::json(*b) : nlohmann::json(nullptr)}};
  }
  cfg["optimizer"] = SetupJson(cell.optimizer.setup);
  cfg["optimizer"]["label"] = cell.optimizer.label;
  cfg["expect"] = cell.expect_fail ? nlohmann::ordered_json{{"verdict", "fail"},
                                                            {"reason", cell.expect_fail->reason}}
                                   : nlohmann::ordered_json(nullptr);
  return cfg;
}

namespace {

// The figure that decided a tolerance check, against its bound
// (docs/results-schema.md, "judged_by"): max abs within atol when it is,
// else the count of elements outside atol + rtol * |b| when the check
// counted them, else max rel against rtol. Null for bitwise checks.
nlohmann::ordered_json JudgedBy(const CheckSpec& c, const CheckOutcome& out) {
  if (c.kind == CheckKind::kBitwise || out.verdict == Verdict::kNotApplicable) return nullptr;
  if (c.kind != CheckKind::kTolerance && c.kind != CheckKind::kLossContinuity) return nullptr;
  if (out.max_abs <= c.atol)
    return {{"figure", "max_abs"}, {"value", out.max_abs}, {"bound", c.atol}};
  if (out.violations)
    return {{"figure", "violations"}, {"value", *out.violations}, {"bound", 0}};
  return {{"figure", "max_rel"}, {"value", out.max_rel}, {"bound", c.rtol}};
}

}  // namespace

nlohmann::ordered_json CheckJson(const CheckSpec& c, const CheckOutcome& out) {
  nlohmann::ordered_json jc;
  jc["name"] = c.Name();
  jc["kind"] = CheckKindName(c.kind);
  jc["on"] = CheckOnName(c.on);
  jc["run"] = out.run;
  jc["against"] = out.against;
  jc["atol"] = c.atol;
  jc["rtol"] = c.rtol;
  jc["max_ulp"] = c.max_ulp >= 0 ? nlohmann::json(c.max_ulp) : nlohmann::json(nullptr);
  jc["verdict"] = VerdictName(out.verdict);
  jc["first_failing_step"] = out.step ? nlohmann::json(*out.step) : nlohmann::json(nullptr);
  jc["first_failing_tensor"] =
      out.tensor.empty() ? nlohmann::json(nullptr) : nlohmann::json(out.tensor);
  jc["max_abs"] = out.max_abs;
  jc["max_rel"] = out.max_rel;
  jc["max_ulp_seen"] = out.max_ulp;
  jc["judged_by"] = JudgedBy(c, out);
  jc["detail"] = out.detail;
  return jc;
}

nlohmann::ordered_json RoutingCheckJson(const CheckOutcome& out) {
  return NamedCheckJson("routing", "params", out);
}

nlohmann::ordered_json NamedCheckJson(const std::string& name, const std::string& on,
                                      const CheckOutcome& out) {
  nlohmann::ordered_json jc;
  jc["name"] = name;
  jc["kind"] = name;
  jc["on"] = on;
  jc["run"] = out.run;
  jc["against"] = out.against;
  jc["atol"] = 0.0;
  jc["rtol"] = 0.0;
  jc["max_ulp"] = nullptr;
  jc["verdict"] = VerdictName(out.verdict);
  jc["first_failing_step"] = out.step ? nlohmann::json(*out.step) : nlohmann::json(nullptr);
  jc["first_failing_tensor"] =
      out.tensor.empty() ? nlohmann::json(nullptr) : nlohmann::json(out.tensor);
  jc["max_abs"] = 0.0;
  jc["max_rel"] = 0.0;
  jc["max_ulp_seen"] = 0;
  jc["detail"] = out.detail;
  return jc;
}

void CheckList::Add(nlohmann::ordered_json entry, const CheckOutcome& out) {
  if (out.verdict == Verdict::kFail && first_failure_.is_null())
    first_failure_ = {{"check", entry["name"]},
                      {"step", entry["first_failing_step"]},
                      {"tensor", entry["first_failing_tensor"]},
                      {"detail", out.detail}};
  checks_.push_back(std::move(entry));
}

void CheckList::WriteTo(nlohmann::ordered_json& result) const {
  result["checks"] = checks_;
  result["verdict"] = first_failure_.is_null() ? "pass" : "fail";
  result["first_failure"] = first_failure_;
}

}  // namespace shardcheck
