// The hyperparameters a checkpoint was saved with against this run's: a
// load warns about each difference by default and refuses under
// --strict-hparams (LoadOptions::strict_hparams). The lr is not compared
// here: the lr schedule check owns it (distributed/checkpoint.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shardcheck {

// One line per difference, "<kind>.<name>: checkpoint X, this run Y",
// between two setups as SetupJson writes them (spec/config_json.h):
// max_grad_norm, then each child's hyperparameters, children matched by
// position and kind (a different optimizer is the schema check's to refuse).
std::vector<std::string> HyperparamDifferences(const nlohmann::json& checkpoint,
                                               const nlohmann::json& run);

}  // namespace shardcheck
