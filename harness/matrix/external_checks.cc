// The checks of an external system's cell (docs/systems.md, "Checks on an
// external system"), judged on the snapshots its runs wrote.
#include <algorithm>
#include <set>
#include <sstream>

#include "harness/cell/compare.h"
#include "harness/matrix/external_cell.h"
#include "spec/state_dict.h"

namespace shardcheck {

namespace {

using Tensors = std::map<std::string, at::Tensor>;

// The comparison group of a snapshot key: params, main_params or the state key.
std::string GroupOfKey(const std::string& key) {
  const StateDictKey k = ParseStateDictKey(key);
  switch (k.role) {
    case StateDictKey::Role::kParam:
      return "params";
    case StateDictKey::Role::kMainParam:
      return "main_params";
    case StateDictKey::Role::kState:
      return k.state_key;
  }
  return "";
}

bool Selected(const std::string& key, CheckOn on) {
  const std::string g = GroupOfKey(key);
  if (on == CheckOn::kParams) return g == "params";
  if (on == CheckOn::kMainParams) return g == "main_params";
  return g != "params" && g != "main_params";
}

// The snapshot `against` holds for step `step` of a run, or null.
const Tensors* Base(const ExternalRuns& r, CheckAgainst against, int64_t step) {
  const Snapshot* s = nullptr;
  switch (against) {
    case CheckAgainst::kReference:
      if (step < 0 || step >= static_cast<int64_t>(r.reference.snapshots.size())) return nullptr;
      return &r.reference.snapshots[static_cast<size_t>(step)].tensors;
    case CheckAgainst::kSingleDevice:
      s = r.single_device.AtStep(step);
      break;
    case CheckAgainst::kUninterrupted:
      s = r.uninterrupted.AtStep(step);
      break;
    case CheckAgainst::kGradients:  // grad_norm checks only, n/a here
      return nullptr;
  }
  return s ? &s->tensors : nullptr;
}

// The first failure by step (right after a load before the step's update),
// then by run order: what a reviewer reads first.
class Judge {
 public:
  explicit Judge(CheckOutcome& out) : out_(out) {}
  void Fail(const std::string& run, int run_index, const Snapshot& s, const std::string& tensor,
            const std::string& what) {
    const auto rank = std::make_tuple(s.step, s.after_load ? 0 : 1, run_index);
    if (out_.verdict == Verdict::kFail && rank >= first_) return;
    first_ = rank;
    out_.verdict = Verdict::kFail;
    out_.step = s.step;
    out_.tensor = tensor;
    std::ostringstream d;
    d << run << " run, step " << s.step << (s.after_load ? " (right after the load)" : "") << ": "
      << what;
    out_.detail = d.str();
    out_.run = run;
  }

 private:
  CheckOutcome& out_;
  std::tuple<int64_t, int, int> first_{};
};

// Compares one snapshot with its base on the selected keys. Against the
// reference, the reference's keys (the registry schema) must all be there;
// against the system's own runs, both sides must hold the same keys.
void CompareSnapshot(const CheckSpec& c, const std::string& run, int run_index, const Snapshot& s,
                     const Tensors& base, double rel_floor, CheckOutcome& out, Judge& judge) {
  const bool vs_reference = c.against == CheckAgainst::kReference;
  const std::string base_name = CheckAgainstName(c.against);
  for (const auto& [key, b] : base) {
    if (!Selected(key, c.on)) continue;
    // Before the first update a system may keep no state yet (torch.optim
    // makes it lazily); the reference's zeros are nothing to compare then.
    if (vs_reference && s.step == 0 && GroupOfKey(key) != "params" &&
        GroupOfKey(key) != "main_params")
      continue;
    const auto it = s.tensors.find(key);
    if (it == s.tensors.end()) {
      judge.Fail(run, run_index, s, key,
                 key + " is missing (the " + base_name +
                     (vs_reference ? " has it in the registry's schema)" : " run has it)"));
      continue;
    }
    const TensorDiff d = c.kind == CheckKind::kBitwise
                             ? CompareBitwise(key, it->second, b, rel_floor)
                             : CompareTolerance(key, it->second, b, c.rtol, c.atol, c.max_ulp);
    out.max_abs = std::max(out.max_abs, d.max_abs);
    out.max_rel = std::max(out.max_rel, d.max_rel);
    out.max_ulp = std::max(out.max_ulp, d.max_ulp);
    if (c.kind != CheckKind::kBitwise) out.violations = out.violations.value_or(0) + d.mismatches;
    if (!d.Equal()) judge.Fail(run, run_index, s, key, d.Summary());
  }
  if (vs_reference) return;
  for (const auto& [key, a] : s.tensors)
    if (Selected(key, c.on) && !base.count(key))
      judge.Fail(run, run_index, s, key, key + " is not in the " + base_name + " run");
}

}  // namespace

CheckOutcome EvaluateExternalCheck(const CheckSpec& c, const Cell& cell, const ExternalRuns& r) {
  CheckOutcome out;
  out.against = CheckAgainstName(c.against);
  if (c.kind == CheckKind::kLossFall || c.kind == CheckKind::kLossContinuity ||
      c.on == CheckOn::kLoss) {
    out.verdict = Verdict::kNotApplicable;
    out.detail = "oracle runs have no loss";
    return out;
  }
  if (c.on == CheckOn::kGradNorm) {
    out.verdict = Verdict::kNotApplicable;
    out.detail = "the system's adapter reports no grad norm";
    return out;
  }
  if (c.on == CheckOn::kMainParams && cell.dtype == "fp32") {
    out.verdict = Verdict::kNotApplicable;
    out.detail = "an fp32 model's params are its main params (checked as params)";
    return out;
  }
  std::vector<const RunSnapshots*> runs = {&r.uninterrupted};
  if (r.resumed) runs.push_back(&*r.resumed);
  if (c.against == CheckAgainst::kUninterrupted) {
    if (!r.resumed) {
      out.verdict = Verdict::kNotApplicable;
      out.detail = "no resume plan: nothing to compare with the uninterrupted run";
      return out;
    }
    runs = {&*r.resumed};
  }
  out.run = runs.size() == 2 ? "uninterrupted+resumed" : runs.front()->run;
  Judge judge(out);
  const double rel_floor = RelFloor(c.atol);
  size_t compared = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const Snapshot& s : runs[i]->snapshots) {
      const Tensors* base = Base(r, c.against, s.step);
      if (!base) {
        judge.Fail(runs[i]->run, static_cast<int>(i), s, "",
                   "the " + CheckAgainstName(c.against) + " run has no snapshot of this step");
        continue;
      }
      CompareSnapshot(c, runs[i]->run, static_cast<int>(i), s, *base, rel_floor, out, judge);
      ++compared;
    }
  }
  if (out.verdict == Verdict::kPass) {
    std::ostringstream d;
    d << (c.kind == CheckKind::kBitwise ? "bitwise equal" : "within tolerance") << " to the "
      << CheckAgainstName(c.against) << (c.against == CheckAgainst::kReference ? "" : " run")
      << " at " << compared << " snapshots";
    if (c.kind != CheckKind::kBitwise)
      d << " (max abs " << out.max_abs << ", max rel " << out.max_rel << ")";
    out.detail = d.str();
  }
  return out;
}

}  // namespace shardcheck
