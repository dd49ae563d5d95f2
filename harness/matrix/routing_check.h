// The routing check: RouteParams (spec/routing.h) against docs/optimizers.md's
// rule, written out again here. The reference and the DistributedOptimizer
// share RouteParams, so their comparison cannot see a routing bug; this
// check can (docs/detection.md, "Blind spots"). Every cell of a composite
// setup (Muon with its scalar optimizer) carries it in result.json as the
// check "routing".
#pragma once

#include <vector>

#include "harness/matrix/cell_checks.h"
#include "spec/config.h"
#include "spec/params.h"

namespace shardcheck {

// Passes when every param of `params` goes where the rule says: to the
// scalar optimizer (child 1) if its role is embedding or output or it is not
// 2-D, else to the whole-param optimizer (child 0). The failure names the
// first misrouted param.
CheckOutcome CheckRouting(const OptimizerSetup& setup, const std::vector<ParamInfo>& params);

}  // namespace shardcheck
