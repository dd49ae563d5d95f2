// Which comparison groups a cell's checks leave unchecked (docs/scenarios.md,
// "Nothing left unchecked"): params, main_params (models other than fp32)
// and every state key of the optimizers the setup holds. A group is
// checked when a bitwise or tolerance check on it applies to the cell; a
// bitwise check on a real model with fp32 gradient reduction applies only
// across a same-DP resume (elsewhere the reduction order changes the bits).
// `run` and `list` warn about each cell that leaves a group unchecked,
// unless its scenario says why (`unchecked:`).
#pragma once

#include <string>
#include <vector>

#include "harness/matrix/scenario.h"

namespace shardcheck {

// The groups of `cell` that no applicable check covers, in the order
// params, main_params, then the setup's state keys.
std::vector<std::string> UncheckedGroups(const Cell& cell);

// "FILE:LINE: cell ID leaves exp_avg, main_params unchecked (...)", or ""
// when the cell checks every group or its scenario says why.
std::string UncheckedWarning(const Cell& cell);

}  // namespace shardcheck
