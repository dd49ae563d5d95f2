#include "harness/matrix/check_coverage.h"

#include <algorithm>

namespace shardcheck {

namespace {

// Whether `c` judges `cell`'s tensors at all (loss and grad-norm checks never do; a
// bitwise check on a real model with fp32 reduction only across a same-DP
// resume: cell_checks.cc's ResumeBitwise).
bool Applies(const CheckSpec& c, const Cell& cell) {
  if (c.kind != CheckKind::kBitwise && c.kind != CheckKind::kTolerance) return false;
  if (c.on == CheckOn::kLoss || c.on == CheckOn::kGradNorm) return false;
  if (c.kind == CheckKind::kBitwise && !cell.system.External() && cell.RealModel() &&
      cell.grad_reduction == GradReduction::kFp32)
    return cell.resume && cell.resume->dp == cell.dp;
  return true;
}

std::vector<std::string> StateKeys(const Cell& cell) {
  std::vector<std::string> keys;
  for (const OptimizerConfig* child : cell.optimizer.setup.Children())
    for (const std::string& k : child->schema().Names())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

}  // namespace

std::vector<std::string> UncheckedGroups(const Cell& cell) {
  bool params = false, main_params = false, state = false;
  for (const CheckSpec& c : cell.checks) {
    if (!Applies(c, cell)) continue;
    params = params || c.on == CheckOn::kParams;
    main_params = main_params || c.on == CheckOn::kMainParams;
    state = state || c.on == CheckOn::kState;
  }
  std::vector<std::string> out;
  if (!params) out.push_back("params");
  if (cell.dtype != "fp32" && !main_params) out.push_back("main_params");
  if (!state)
    for (const std::string& k : StateKeys(cell)) out.push_back(k);
  return out;
}

std::string UncheckedWarning(const Cell& cell) {
  if (!cell.unchecked_reason.empty()) return "";
  const std::vector<std::string> groups = UncheckedGroups(cell);
  if (groups.empty()) return "";
  std::string list;
  for (const auto& g : groups) list += (list.empty() ? "" : ", ") + g;
  return cell.file + ":" + std::to_string(cell.line) + ": cell " + cell.id + " leaves " + list +
         " unchecked (no bitwise or tolerance check on them applies to this cell; add one, or "
         "say why in the scenario's `unchecked:`)";
}

}  // namespace shardcheck
