// An optimizer setup as a user asks for it, on the command line or in a
// scenario file: a setup name, an optional scalar optimizer, hyperparameters
// by name as text, clipping and the lr schedule. Resolving it against the
// registry gives a validated OptimizerSetup; every error names the key and
// what would have been valid.
//
// Where a hyperparameter goes in a composite (Muon + scalar):
//   - lr and weight_decay go to both children (as Megatron's Muon does);
//   - any other name goes to the main child if its kind declares it, else
//     to the scalar child;
//   - "scalar_<name>" (--scalar-<name>) goes to the scalar child only.
// A name that no child declares is an error listing what each child takes.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/config.h"

namespace shardcheck {

struct SetupRequest {
  std::string name;              // a named setup or a kind ("lion", "muon_lion", "muon")
  std::string scalar_optimizer;  // composites: overrides the name's scalar optimizer
  std::vector<std::pair<std::string, std::string>> hyper;  // (name, text), in order given
  std::vector<std::pair<std::string, std::string>>
      scalar_hyper;  // the scalar child's (without "scalar_")
  std::optional<double> max_grad_norm;
  std::optional<std::string> lr_decay_style;
  std::optional<int64_t> lr_warmup_steps, lr_decay_steps;
  std::optional<double> min_lr;

  // Throws Error naming the first unknown or invalid key.
  OptimizerSetup Resolve() const;
};

// Every hyperparameter name some registered kind declares, first
// declaration first, each with the kinds that declare it.
struct DeclaredHyperParam {
  const HyperParamSpec* spec = nullptr;  // the first declaration
  std::vector<std::string> kinds;
  bool elementwise = false;  // some elementwise kind declares it (so --scalar-<name> exists)
};
std::vector<DeclaredHyperParam> AllDeclaredHyperParams();

}  // namespace shardcheck
