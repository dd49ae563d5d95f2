// Reference Adam (L2 weight decay) and AdamW (decoupled weight decay).
//
// This is the readable reference: the update is written as plain tensor ops,
// one IEEE fp32 op each, in exactly the order of docs/optimizers.md
// (Kingma & Ba, "Adam", 2015; Loshchilov & Hutter, "Decoupled Weight Decay
// Regularization", 2019; PyTorch's Adam/AdamW docs for the step order).
#pragma once

#include <ATen/ATen.h>

#include "reference/config.h"

namespace shardcheck {

// One Adam/AdamW update at step `t` (>= 1) of one param. `p`, `exp_avg`,
// `exp_avg_sq` are fp32 and updated in place; `g` (fp32, same shape) is
// read only. `c.kind` selects L2 (kAdam) or decoupled (kAdamW) decay; the
// effective decay is c.weight_decay * wd_mult.
void AdamUpdate(const OptimizerConfig& c, double wd_mult, int64_t t, at::Tensor& p,
                const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq);

}  // namespace shardcheck
