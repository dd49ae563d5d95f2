// JSON of optimizer configurations, as config.json, result.json and
// checkpoint metadata record them.
#pragma once

#include <nlohmann/json.hpp>

#include "reference/config.h"

namespace shardcheck {

// One child: kind, hyperparameters it uses, and its state schema.
nlohmann::ordered_json ConfigJson(const OptimizerConfig& c);
// The setup: name, max_grad_norm, and every child with its role
// ("all", or "muon" and "scalar"), config and schema.
nlohmann::ordered_json SetupJson(const OptimizerSetup& s);

}  // namespace shardcheck
