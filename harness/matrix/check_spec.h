// The checks a scenario cell runs (docs/scenarios.md, "Checks"): what is
// compared (params, main params, state, loss, the global grad norm), how (bitwise, within a
// tolerance, loss continuity across a resume, the loss falling), and the
// tolerances.
#pragma once

#include <cstdint>
#include <string>

namespace shardcheck {

enum class CheckKind { kBitwise, kTolerance, kLossContinuity, kLossFall };
enum class CheckOn { kParams, kMainParams, kState, kLoss, kGradNorm };
// What the runs are compared with: shardcheck's reference optimizer (the
// default), the system under test's own single-device run, or (for the
// resumed run) the uninterrupted run. External systems (docs/systems.md)
// use all three; shardcheck's own cells compare with the reference. The
// grad norm is also compared with an fp64 norm computed independently,
// element by element, from the global gradients (kGradients).
enum class CheckAgainst { kReference, kSingleDevice, kUninterrupted, kGradients };

std::string CheckKindName(CheckKind k);  // "bitwise", "tolerance", "loss_continuity", "loss_fall"
std::string CheckOnName(CheckOn o);  // "params", "main_params", "state", "loss", "grad_norm"
// "reference", "single_device", "uninterrupted", "gradients"
std::string CheckAgainstName(CheckAgainst a);
// Throw Error listing the accepted names.
CheckKind ParseCheckKind(const std::string& name);
CheckOn ParseCheckOn(const std::string& name);
CheckAgainst ParseCheckAgainst(const std::string& name);

struct CheckSpec {
  CheckKind kind = CheckKind::kBitwise;
  CheckOn on = CheckOn::kParams;
  double atol = 0.0;
  double rtol = 0.0;
  int64_t max_ulp = -1;   // -1: no ULP bound
  double min_fall = 0.0;  // loss_fall: (first - last) / first must reach this
  CheckAgainst against = CheckAgainst::kReference;
  // "bitwise-params", "tolerance-state", ...; "-vs-<against>" is added
  // when not against the reference ("bitwise-state-vs-single_device").
  std::string Name() const;
};

}  // namespace shardcheck
