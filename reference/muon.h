// Reference Muon (Keller Jordan, "Muon: An optimizer for hidden layers in
// neural networks", 2024; Megatron-LM / Emerging-Optimizers for the scale
// modes and defaults).
//
// Momentum, optional Nesterov, Newton–Schulz orthogonalization of the 2-D
// update, scaled step. Plain tensor ops in the order of docs/optimizers.md.
#pragma once

#include <ATen/ATen.h>

#include "reference/config.h"

namespace shardcheck {

// Newton–Schulz iteration of `c` applied to a 2-D fp32 matrix `g`; returns a
// new fp32 tensor of g's shape whose singular values lie near 1 (see
// docs/optimizers.md for the band). Works on g^T when rows > cols.
at::Tensor NewtonSchulz(const at::Tensor& g, const OptimizerConfig& c);

// The step scale of a rows x cols matrix under c.scale (and c.extra_scale).
double MuonScaleFactor(const OptimizerConfig& c, int64_t rows, int64_t cols);

// One Muon update of one 2-D param: `p` and `momentum_buffer` (fp32) are
// updated in place, `g` is read only.
void MuonUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& p, const at::Tensor& g,
                at::Tensor& momentum_buffer);

}  // namespace shardcheck
