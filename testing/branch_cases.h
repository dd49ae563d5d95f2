// Branch cases: hyperparameter settings generated from an optimizer kind's
// registry declarations, so that tests which would otherwise run only the
// defaults also run every code path a hyperparameter can pick (Nesterov,
// scale modes, bf16 Newton–Schulz, ...) without anyone writing a case.
//
// The contract of BranchCases(kind), in registry order:
//   - the first case is `defaults`: no hyperparameter changed;
//   - then, for each declared hyperparameter, cases that change it alone:
//       bool        its non-default value                 nesterov_true
//       choice      every non-default choice, in order    scale_mode_shape
//       number      one other valid value (below)         beta1_0.45
//       integer     default+1, else default-1              ns_steps_6
//       numbers     each element times 0.99               ns_coefficients_x0.99
//     A number takes 0.5 x default; if that equals the default or is out of
//     range: default + 0.1 x max(1, |default|), then default - that step,
//     then the midpoint of a two-sided range (open bounds respected).
//   - every value passes HyperParamSpec::Check, and every case applied to the
//     kind's defaults passes OptimizerConfig::Validate (the kind's
//     cross-hyperparameter constraints).
// A hyperparameter type the generator does not know, or a range that leaves
// no other valid value, throws Error: a new kind of hyperparameter fails the
// tests loudly instead of going untested (testing/branch_cases_test.cc).
#pragma once

#include <string>
#include <vector>

#include "spec/config.h"
#include "spec/hyperparams.h"
#include "spec/optimizer_spec.h"

namespace shardcheck {

struct BranchCase {
  std::string name;   // "defaults", "nesterov_true", "beta1_0.45"
  std::string param;  // the hyperparameter changed; empty for `defaults`
  HyperValue value;   // its value (unused for `defaults`)

  bool IsDefaults() const { return param.empty(); }
  // Sets the case's hyperparameter on `config` (nothing for `defaults`).
  void ApplyTo(OptimizerConfig& config) const;
};

// The cases of one declaration (empty for none: never; throws instead).
// `who` names the kind in messages.
std::vector<BranchCase> BranchCasesOf(const HyperParamSpec& spec, const std::string& who);

// `defaults`, then every hyperparameter's cases, from a spec alone (each
// value checked against its declaration).
std::vector<BranchCase> BranchCasesForSpec(const OptimizerSpec& spec);

// BranchCasesForSpec of a registered kind, each case also validated on the
// kind's default config. Throws Error for an unknown kind.
std::vector<BranchCase> BranchCases(const std::string& kind);

// `name` with every character a gtest name may not hold replaced:
// '.' -> 'p', '-' -> 'm', '+' -> 'P', anything else -> '_'.
std::string GtestSafeName(const std::string& name);

}  // namespace shardcheck
