// Reference Lion (Chen et al., "Symbolic Discovery of Optimization
// Algorithms", 2023; the authors' code and Megatron-LM's defaults).
//
// Plain tensor ops in the order of docs/optimizers.md. Lion keeps one
// moment, exp_avg: the interpolation `c` that picks the sign is made from
// the old moment, which is updated with beta2 afterwards.
#pragma once

#include <ATen/ATen.h>

#include "reference/config.h"

namespace shardcheck {

// One Lion update of one param. `p` and `exp_avg` (fp32) are updated in
// place; `g` is read only. sign(0) = 0, so an element with c == 0 does not
// move (apart from weight decay).
void LionUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& p, const at::Tensor& g,
                at::Tensor& exp_avg);

}  // namespace shardcheck
