// The checks a scenario cell runs (docs/scenarios.md, "Checks"): what is
// compared (params, main params, state, loss), how (bitwise, within a
// tolerance, loss continuity across a resume, the loss falling), and the
// tolerances.
#pragma once

#include <cstdint>
#include <string>

namespace shardcheck {

enum class CheckKind { kBitwise, kTolerance, kLossContinuity, kLossFall };
enum class CheckOn { kParams, kMainParams, kState, kLoss };

std::string CheckKindName(CheckKind k);  // "bitwise", "tolerance", "loss_continuity", "loss_fall"
std::string CheckOnName(CheckOn o);      // "params", "main_params", "state", "loss"
// Throw Error listing the accepted names.
CheckKind ParseCheckKind(const std::string& name);
CheckOn ParseCheckOn(const std::string& name);

struct CheckSpec {
  CheckKind kind = CheckKind::kBitwise;
  CheckOn on = CheckOn::kParams;
  double atol = 0.0;
  double rtol = 0.0;
  int64_t max_ulp = -1;      // -1: no ULP bound
  double min_fall = 0.0;     // loss_fall: (first - last) / first must reach this
  std::string Name() const;  // "bitwise-params", "tolerance-state", ...
};

}  // namespace shardcheck
