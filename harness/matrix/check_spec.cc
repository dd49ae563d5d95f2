#include "harness/matrix/check_spec.h"

#include "spec/error.h"

namespace shardcheck {

std::string CheckKindName(CheckKind k) {
  switch (k) {
    case CheckKind::kBitwise:
      return "bitwise";
    case CheckKind::kTolerance:
      return "tolerance";
    case CheckKind::kLossContinuity:
      return "loss_continuity";
    case CheckKind::kLossFall:
      return "loss_fall";
  }
  return "?";
}

std::string CheckOnName(CheckOn o) {
  switch (o) {
    case CheckOn::kParams:
      return "params";
    case CheckOn::kMainParams:
      return "main_params";
    case CheckOn::kState:
      return "state";
    case CheckOn::kLoss:
      return "loss";
    case CheckOn::kGradNorm:
      return "grad_norm";
  }
  return "?";
}

std::string CheckAgainstName(CheckAgainst a) {
  switch (a) {
    case CheckAgainst::kReference:
      return "reference";
    case CheckAgainst::kSingleDevice:
      return "single_device";
    case CheckAgainst::kUninterrupted:
      return "uninterrupted";
    case CheckAgainst::kGradients:
      return "gradients";
  }
  return "?";
}

CheckKind ParseCheckKind(const std::string& name) {
  for (auto k : {CheckKind::kBitwise, CheckKind::kTolerance, CheckKind::kLossContinuity,
                 CheckKind::kLossFall})
    if (CheckKindName(k) == name) return k;
  throw Error("check kind '" + name +
              "' (expected bitwise, tolerance, loss_continuity or loss_fall)");
}

CheckOn ParseCheckOn(const std::string& name) {
  for (auto o : {CheckOn::kParams, CheckOn::kMainParams, CheckOn::kState, CheckOn::kLoss,
                 CheckOn::kGradNorm})
    if (CheckOnName(o) == name) return o;
  throw Error("check on '" + name + "' (expected params, main_params, state, loss or grad_norm)");
}

CheckAgainst ParseCheckAgainst(const std::string& name) {
  for (auto a : {CheckAgainst::kReference, CheckAgainst::kSingleDevice, CheckAgainst::kUninterrupted,
                 CheckAgainst::kGradients})
    if (CheckAgainstName(a) == name) return a;
  throw Error("check against '" + name +
              "' (expected reference, single_device, uninterrupted or gradients)");
}

std::string CheckSpec::Name() const {
  std::string name = CheckKindName(kind) + "-" + CheckOnName(on);
  if (against != CheckAgainst::kReference) name += "-vs-" + CheckAgainstName(against);
  return name;
}

}  // namespace shardcheck
