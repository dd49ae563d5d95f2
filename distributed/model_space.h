// Model-space views of a DistributedOptimizer's sharded state: the full
// fp32 main param and every state tensor of every param, assembled on one
// rank from every rank's pieces (a gather, byte for byte).
#pragma once

#include "distributed/distrib_optimizer.h"
#include "spec/state_dict.h"

namespace shardcheck {

// Collective. On `root`, returns the full state in the reference's state
// dict layout: "param.<name>" (model params), "main_param.<name>" (only for
// non-fp32 models) and "state.<key>.<name>" for every key of the schema of
// the child that owns the param, plus step, optimizer name and groups. Other
// ranks return an empty StateDict.
StateDict GatherModelSpace(DistributedOptimizer& opt, int root = 0);

}  // namespace shardcheck
