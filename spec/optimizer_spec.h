// The spec part of an optimizer registry entry: name, state schema,
// hyperparameters, placement and traits. Everything that lists, validates,
// records or dispatches on optimizers reads these fields; nothing outside
// the registry names a specific optimizer.
#pragma once

#include <string>
#include <vector>

#include "spec/hyperparams.h"
#include "spec/schema.h"

namespace shardcheck {

class OptimizerConfig;

// Where the distributed side runs an optimizer kind.
enum class Placement {
  // Each element's update reads only that element (and per-step scalars):
  // params are sharded over DP ranks in Megatron's buffer layout and a
  // fused shard kernel updates each rank's slices.
  kElementwise,
  // The update needs the whole param (e.g. Newton–Schulz on a matrix):
  // whole params are assigned to DP ranks (layer-wise, like Muon), the owner
  // updates them and the results are all-gathered.
  kWholeParam,
};

std::string PlacementName(Placement p);  // "elementwise", "whole_param"

struct OptimizerSpec {
  std::string name;    // the kind: "adamw"; CLI and scenario name; checkpoint metadata
  std::string title;   // one line for --help and `shardcheck optimizers`
  std::string source;  // where the definition comes from (paper, upstream code)
  StateSchema schema;  // per-param state tensors, in order
  std::vector<HyperParamSpec> hyperparams;  // every kind declares lr and weight_decay
  Placement placement = Placement::kElementwise;

  // Traits.
  // Elements move by exactly +-lr (sign-based updates, e.g. Lion): a rounding
  // difference in a gradient near zero flips a sign and moves that element by
  // 2 lr, so real-model runs compare such optimizers' params on the loss only.
  bool sign_based = false;
  // Whole-param kinds that take 2-D params only (routing gives them only the
  // 2-D hidden weights anyway; a model without any cannot use them).
  bool needs_2d = false;
  // The kind this name stands for as a composite's scalar optimizer (Megatron's
  // Adam is decoupled: "adam" means "adamw" there); empty: itself.
  std::string as_scalar;
  // Whole-param kinds: the scalar optimizer of the setup named after the kind
  // alone, and the composites listed among the named setups.
  std::string default_scalar;
  std::vector<std::string> named_scalars;
  // Registered by tests only; never listed by the shardcheck binary.
  bool test_only = false;
  // Constraints between hyperparameters beyond each one's range. Throws Error.
  void (*validate)(const OptimizerConfig& config) = nullptr;

  const HyperParamSpec* FindHyperParam(const std::string& name) const;
  std::vector<std::string> HyperParamNames() const;
};

}  // namespace shardcheck
