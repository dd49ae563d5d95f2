// JSON of optimizer configurations and of the registry, as config.json,
// result.json, results.json, checkpoint metadata and `shardcheck
// optimizers --json` record them. Every field comes from the registry's
// declarations: nothing here names an optimizer.
#pragma once

#include <nlohmann/json.hpp>

#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck {

// One child: kind, every declared hyperparameter's value, state schema.
nlohmann::ordered_json ConfigJson(const OptimizerConfig& c);
// The setup: name, max_grad_norm, lr schedule, and every child with its
// role ("all", or "whole_param" and "scalar"), config and schema.
nlohmann::ordered_json SetupJson(const OptimizerSetup& s);
// A state schema: [{"key": "exp_avg", "dtype": "fp32"}, ...].
nlohmann::ordered_json SchemaJson(const StateSchema& s);
// One registry entry: name, title, source, placement, schema,
// hyperparameters (type, default, range, per_group, help) and traits.
nlohmann::ordered_json OptimizerSpecJson(const OptimizerSpec& s);
// The registry: "kinds" (every entry) and "setups" (every named setup with
// its children's kinds and schemas).
nlohmann::ordered_json RegistryJson();

}  // namespace shardcheck
