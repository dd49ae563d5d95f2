#include "harness/matrix/cell_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "harness/cell/compare.h"

namespace shardcheck {

namespace {

using NamedRun = std::pair<std::string, const TrainResult*>;

std::vector<NamedRun> DistributedRuns(const CellRuns& r) {
  std::vector<NamedRun> out = {{"uninterrupted", &r.uninterrupted.root}};
  if (r.resumed) out.push_back({"resumed", &r.resumed->root});
  return out;
}

// The comparison groups a check covers.
std::vector<std::string> GroupsOf(CheckOn on, const std::vector<std::string>& groups) {
  if (on == CheckOn::kParams) return {"params"};
  if (on == CheckOn::kMainParams) return {"main_params"};
  std::vector<std::string> state;
  for (const auto& g : groups)
    if (g != "params" && g != "main_params") state.push_back(g);
  return state;
}

void Fail(CheckOutcome& out, int64_t step, const std::string& tensor, const std::string& detail,
          const std::string& run = "") {
  if (out.verdict != Verdict::kPass) return;  // the first failure is the one reported
  out.verdict = Verdict::kFail;
  out.step = step;
  out.tensor = tensor;
  out.detail = detail;
  if (!run.empty()) out.run = run;
}

// The reference's loss falls by min_fall: (first - mean of the last 5) / first;
// the uninterrupted run's must fall as much (it trains the same model).
CheckOutcome LossFall(const CheckSpec& c, const CellRuns& r) {
  CheckOutcome out;
  out.run = "reference";
  out.against = "its first step";
  const auto& l = r.reference.loss;
  const size_t tail = std::min<size_t>(5, l.size());
  double last = 0;
  for (size_t k = l.size() - tail; k < l.size(); ++k) last += l[k] / static_cast<double>(tail);
  const double fall = (l.front() - last) / l.front();
  std::ostringstream d;
  d << "reference loss " << l.front() << " -> " << last << " (mean of the last " << tail
    << " steps): fell " << 100.0 * fall << "%, needed " << 100.0 * c.min_fall << "%";
  out.detail = d.str();
  out.max_rel = fall;
  if (!(fall >= c.min_fall)) Fail(out, static_cast<int64_t>(l.size()), "loss", out.detail);
  const auto& steps = r.uninterrupted.root.steps;
  const double a0 = steps.front().loss, a1 = steps.back().loss;
  if (!((a0 - a1) / a0 >= c.min_fall))
    Fail(out, steps.back().step, "loss",
         out.detail + "; the uninterrupted run fell only " +
             std::to_string(100.0 * (a0 - a1) / a0) + "%");
  return out;
}

// Each distributed run's loss against the reference's, step by step.
CheckOutcome LossTolerance(const CheckSpec& c, const CellRuns& r) {
  CheckOutcome out;
  size_t compared = 0;
  for (const auto& [name, run] : DistributedRuns(r)) {
    for (const auto& s : run->steps) {
      if (s.after_load || s.step < 1 || s.step > r.reference.steps()) continue;
      const double want = r.reference.loss[static_cast<size_t>(s.step - 1)];
      const double d = std::fabs(s.loss - want);
      out.max_abs = std::max(out.max_abs, d);
      out.max_rel = std::max(out.max_rel, d / std::max(std::fabs(want), 1e-30));
      ++compared;
      if (!(d <= c.atol + c.rtol * std::fabs(want))) {
        std::ostringstream dd;
        dd << name << " run, step " << s.step << ": loss " << s.loss << " vs reference " << want;
        Fail(out, s.step, "loss", dd.str(), name);
      }
    }
  }
  if (out.verdict == Verdict::kPass) {
    std::ostringstream dd;
    dd << "losses within tolerance of the reference at " << compared << " steps (max rel "
       << out.max_rel << ")";
    out.detail = dd.str();
  }
  return out;
}

// The resumed run's loss continues the uninterrupted curve.
CheckOutcome LossContinuity(const CheckSpec& c, const CellRuns& r) {
  CheckOutcome out;
  out.run = "resumed";
  out.against = "uninterrupted";
  std::map<int64_t, double> base;
  for (const auto& s : r.uninterrupted.root.steps) base[s.step] = s.loss;
  size_t compared = 0;
  for (const auto& s : r.resumed->root.steps) {
    if (s.after_load || !base.count(s.step)) continue;
    const double a = base[s.step], b = s.loss;
    const double d = std::fabs(b - a);
    out.max_abs = std::max(out.max_abs, d);
    out.max_rel = std::max(out.max_rel, d / std::max(std::fabs(a), 1e-30));
    ++compared;
    if (!(d <= c.atol + c.rtol * std::fabs(a))) {
      std::ostringstream dd;
      dd << "step " << s.step << ": resumed loss " << b << " vs uninterrupted " << a;
      Fail(out, s.step, "loss", dd.str());
    }
  }
  if (out.verdict == Verdict::kPass)
    out.detail =
        "resumed loss continues the uninterrupted curve at " + std::to_string(compared) + " steps";
  return out;
}

// One run's grad norm per step, as a check judges it.
struct NormSeries {
  std::string run;
  std::vector<std::pair<int64_t, double>> norms;  // (step, norm)
};

std::vector<NormSeries> GradNormRuns(const CellRuns& r, bool with_reference) {
  std::vector<NormSeries> out;
  if (with_reference) {
    NormSeries ref{"reference", {}};
    for (size_t i = 0; i < r.reference.grad_norm.size(); ++i)
      ref.norms.push_back({static_cast<int64_t>(i + 1), r.reference.grad_norm[i]});
    out.push_back(std::move(ref));
  }
  for (const auto& [name, run] : DistributedRuns(r)) {
    NormSeries series{name, {}};
    for (const auto& s : run->steps)
      if (!s.after_load) series.norms.push_back({s.step, s.grad_norm});
    out.push_back(std::move(series));
  }
  return out;
}

// Every run's global grad norm, step by step, against the reference's, or
// (against: gradients) the reference's own and every run's against the
// fp64 norm computed independently from the step's global gradients
// (ReferenceTrajectory::gradient_norm): bitwise, or within atol + rtol * |b|.
CheckOutcome GradNormCheck(const CheckSpec& c, const CellRuns& r) {
  CheckOutcome out;
  const bool vs_gradients = c.against == CheckAgainst::kGradients;
  const std::vector<double>& want = vs_gradients ? r.reference.gradient_norm : r.reference.grad_norm;
  out.against = vs_gradients ? "fp64 norm of the global gradients" : "reference";
  out.run = vs_gradients ? "reference+uninterrupted+resumed" : out.run;
  size_t compared = 0;
  for (const NormSeries& series : GradNormRuns(r, vs_gradients)) {
    for (const auto& [step, norm] : series.norms) {
      if (step < 1 || static_cast<size_t>(step) > want.size()) continue;
      const double b = want[static_cast<size_t>(step - 1)];
      const double d = std::fabs(norm - b);
      out.max_abs = std::max(out.max_abs, d);
      out.max_rel = std::max(out.max_rel, d / std::max(std::fabs(b), 1e-30));
      ++compared;
      const bool bad = c.kind == CheckKind::kBitwise ? std::memcmp(&norm, &b, sizeof b) != 0
                                                     : !(d <= c.atol + c.rtol * std::fabs(b));
      if (!bad) continue;
      std::ostringstream dd;
      dd.precision(17);
      dd << series.run << " run, step " << step << ": grad norm " << norm << " vs " << out.against
         << " " << b;
      Fail(out, step, "grad_norm", dd.str(), series.run);
    }
  }
  if (out.verdict == Verdict::kPass) {
    std::ostringstream dd;
    dd << "grad norms " << (c.kind == CheckKind::kBitwise ? "bitwise equal" : "within tolerance")
       << " to the " << out.against << " at " << compared << " steps (max rel " << out.max_rel
       << ")";
    out.detail = dd.str();
  }
  return out;
}

// The comparison group a final-state tensor belongs to for a check `on`.
std::string FinalStateGroup(const std::string& key, CheckOn on, bool fp32) {
  const StateDictKey k = ParseStateDictKey(key);
  switch (k.role) {
    case StateDictKey::Role::kParam:
      return (fp32 && on == CheckOn::kMainParams) ? "main_params" : "params";
    case StateDictKey::Role::kMainParam:
      return "main_params";
    case StateDictKey::Role::kState:
      return k.state_key;
  }
  return "";
}

// Real models: a same-DP resume reproduces the uninterrupted run bit for bit
// (losses and final state).
CheckOutcome ResumeBitwise(const CheckSpec& c, const Cell& cell, const CellRuns& r) {
  CheckOutcome out;
  out.run = "resumed";
  out.against = "uninterrupted";
  if (!r.resumed || cell.resume->dp != cell.dp) {
    out.verdict = Verdict::kNotApplicable;
    out.detail = r.resumed ? "the resume changes the DP size: the reduction order changes, so only "
                             "tolerance applies"
                           : "no resume plan";
    return out;
  }
  std::map<int64_t, double> base;
  for (const auto& s : r.uninterrupted.root.steps) base[s.step] = s.loss;
  for (const auto& s : r.resumed->root.steps)
    if (!s.after_load && base.count(s.step) &&
        std::memcmp(&base[s.step], &s.loss, sizeof(double)) != 0)
      Fail(out, s.step, "loss",
           "step " + std::to_string(s.step) +
               ": the resumed loss differs from the uninterrupted run's");
  const std::vector<std::string> sel = GroupsOf(c.on, r.groups);
  for (const auto& [key, t] : r.uninterrupted.root.final_state.tensors) {
    const std::string group = FinalStateGroup(key, c.on, cell.dtype == "fp32");
    if (std::find(sel.begin(), sel.end(), group) == sel.end()) continue;
    const TensorDiff d = CompareBitwise(key, r.resumed->root.final_state.tensors.at(key), t);
    out.max_abs = std::max(out.max_abs, d.max_abs);
    if (!d.Equal())
      Fail(out, cell.steps, key, "final state differs from the uninterrupted run: " + d.Summary());
  }
  if (out.verdict == Verdict::kPass)
    out.detail = "resumed run bitwise equal to the uninterrupted run (losses and final state)";
  return out;
}

// Distributed runs against the reference trajectory, from the per-step
// figures the runs recorded.
CheckOutcome AgainstReference(const CheckSpec& c, const CellRuns& r) {
  CheckOutcome out;
  const std::vector<std::string> sel = GroupsOf(c.on, r.groups);
  size_t compared = 0;
  for (const auto& [name, run] : DistributedRuns(r)) {
    compared += run->steps.size();
    for (const auto& s : run->steps) {
      for (const auto& g : s.groups) {
        if (std::find(sel.begin(), sel.end(), g.group) == sel.end()) continue;
        out.max_abs = std::max(out.max_abs, g.max_abs);
        out.max_rel = std::max(out.max_rel, g.max_rel);
        out.max_ulp = std::max(out.max_ulp, g.max_ulp);
        bool bad;
        if (c.kind == CheckKind::kBitwise) {
          bad = g.mismatches > 0;
        } else {
          const bool counted = c.atol == r.count_atol && c.rtol == r.count_rtol;
          // Uncounted bounds judge from the figures: max_rel is taken against
          // max(|b|, floor), so it bounds |a - b| by rtol * |b| only where
          // rtol * floor stays within this check's atol.
          const bool rel_ok = g.max_rel <= c.rtol && c.rtol * RelFloor(r.count_atol) <= c.atol;
          bad = counted ? g.tol_violations > 0 : !(g.max_abs <= c.atol || rel_ok);
          if (counted) out.violations = out.violations.value_or(0) + g.tol_violations;
          if (c.max_ulp >= 0 && g.max_ulp > c.max_ulp) bad = true;
        }
        if (!bad) continue;
        std::string tensor = g.group;
        if (run->first_mismatch && run->first_mismatch->step == s.step)
          tensor = run->first_mismatch->tensor;
        std::ostringstream d;
        d << name << " run, step " << s.step << (s.after_load ? " (right after the load)" : "")
          << ", " << g.group << ": " << g.mismatches << " elements differ, max abs " << g.max_abs
          << ", max rel " << g.max_rel << ", max ulp " << g.max_ulp;
        Fail(out, s.step, tensor, d.str(), name);
      }
    }
  }
  if (out.verdict == Verdict::kPass) {
    std::ostringstream d;
    d << (c.kind == CheckKind::kBitwise ? "bitwise equal" : "within tolerance")
      << " to the reference at " << compared << " compared steps";
    if (c.kind != CheckKind::kBitwise)
      d << " (max abs " << out.max_abs << ", max rel " << out.max_rel << ")";
    out.detail = d.str();
  }
  return out;
}

}  // namespace

std::string VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kNotApplicable:
      return "n/a";
  }
  return "?";
}

CheckOutcome EvaluateCheck(const CheckSpec& c, const Cell& cell, const CellRuns& r) {
  if (c.on == CheckOn::kGradNorm) return GradNormCheck(c, r);
  switch (c.kind) {
    case CheckKind::kLossFall:
      return LossFall(c, r);
    case CheckKind::kLossContinuity:
      return LossContinuity(c, r);
    case CheckKind::kTolerance:
      if (c.on == CheckOn::kLoss) return LossTolerance(c, r);
      return AgainstReference(c, r);
    case CheckKind::kBitwise:
      // Real models with fp32 reduction are bitwise only across a same-DP resume.
      if (cell.RealModel() && cell.grad_reduction == GradReduction::kFp32)
        return ResumeBitwise(c, cell, r);
      return AgainstReference(c, r);
  }
  return {};
}

}  // namespace shardcheck
