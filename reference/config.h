// Optimizer configurations with their defaults (docs/optimizers.md).
//
// One OptimizerSetup feeds the reference and the distributed side alike, so
// the two cannot drift. A setup is one optimizer (adam, adamw, lion) or Muon
// chained with a scalar optimizer (muon_adam, muon_lion).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck {

enum class OptimizerKind { kAdam, kAdamW, kLion, kMuon };
enum class MuonScale { kSpectral, kShape, kMoonlight };

std::string KindName(OptimizerKind kind);
// Throws Error naming the accepted values when `name` is not a kind.
OptimizerKind ParseKind(const std::string& name);
std::string MuonScaleName(MuonScale scale);
MuonScale ParseMuonScale(const std::string& name);

// Newton–Schulz quintic coefficients (a, b, c) of one iteration.
using NsCoefficients = std::array<double, 3>;
inline constexpr NsCoefficients kDefaultNsCoefficients = {3.4445, -4.7750, 2.0315};

// Hyperparameters of one (child) optimizer. Fields that a kind does not use
// keep their defaults and are ignored by it.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdam;
  double lr = 1e-3;
  double weight_decay = 0.0;
  // Adam, AdamW, Lion.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Muon.
  double momentum = 0.95;
  bool nesterov = false;
  int ns_steps = 5;
  // Empty: kDefaultNsCoefficients for every iteration. Else one triple per
  // iteration (size must equal ns_steps) or one triple for all.
  std::vector<NsCoefficients> ns_coefficients;
  MuonScale scale = MuonScale::kSpectral;
  double extra_scale = 1.0;
  bool ns_bf16 = false;  // Newton–Schulz matmuls in bf16 (fp32 by default)

  // The defaults of `kind` (docs/optimizers.md, "Defaults").
  static OptimizerConfig Defaults(OptimizerKind kind);
  // Coefficients of iteration `i` (0-based) of Newton–Schulz.
  NsCoefficients CoefficientsAt(int i) const;
  // Throws Error naming the first invalid field.
  void Validate() const;
};

// What a run optimizes with: one optimizer, or Muon plus its scalar optimizer.
struct OptimizerSetup {
  // "adam", "adamw", "lion", "muon_adam" or "muon_lion".
  std::string name = "adam";
  OptimizerConfig main;                  // adam/adamw/lion, or muon
  std::optional<OptimizerConfig> scalar;  // set exactly for muon_*
  double max_grad_norm = 0.0;             // 0: no clipping

  bool IsMuon() const { return scalar.has_value(); }
  // The default setup of a name (throws Error on an unknown name).
  static OptimizerSetup Defaults(const std::string& name);
  // All five setup names, in a fixed order.
  static const std::vector<std::string>& Names();
  void Validate() const;
};

}  // namespace shardcheck
