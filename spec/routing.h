// Routing of params to the children of an optimizer setup, param groups,
// and the clipping rule: the part of the optimizer spec that the reference
// and the distributed side share (docs/optimizers.md).
#pragma once

#include <vector>

#include "spec/config.h"
#include "spec/params.h"
#include "spec/schema.h"
#include "spec/state_dict.h"

namespace shardcheck {

// One child optimizer of a setup and the params it owns.
struct ChildOptimizer {
  OptimizerConfig config;
  StateSchema schema;
  std::vector<int> params;  // indices into the model's params, registration order
};

// A param group: one child, one wd_mult.
struct ParamGroup {
  int child = 0;
  double wd_mult = 1.0;
  std::vector<int> params;
};

// Splits params among the children of `setup`: a single child for an
// elementwise setup; for a composite child 0 is the whole-param optimizer
// (2-D hidden weights) and child 1 the scalar optimizer (everything
// GoesToScalarOptimizer). A child with no params is kept, so the step
// counter and groups exist everywhere.
std::vector<ChildOptimizer> RouteParams(const OptimizerSetup& setup,
                                        const std::vector<ParamInfo>& params);

// Groups of each child by wd_mult (ParamInfo::DefaultWdMult), in order of
// child, then wd_mult descending.
std::vector<ParamGroup> BuildGroups(const std::vector<ChildOptimizer>& children,
                                    const std::vector<ParamInfo>& params);

// The groups as checkpoints and state dicts record them: the child's kind,
// wd_mult, lr, weight decay and member names.
std::vector<GroupRecord> GroupRecords(const std::vector<ChildOptimizer>& children,
                                      const std::vector<ParamInfo>& params);

// The fp32 multiplier that clipping applies to every gradient, or 1 when
// clipping is off (max_norm = 0) or not needed (coefficient >= 1).
float ClipCoefficient(double max_norm, double norm);

}  // namespace shardcheck
