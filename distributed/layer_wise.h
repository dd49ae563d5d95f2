// Muon's layer-wise optimizer on the distributed side: whole 2-D params
// are assigned to DP ranks (AssignLayerWise); the owner holds the fp32 main
// param and momentum_buffer, receives the full reduced gradient, runs the
// Muon update (docs/optimizers.md, the same op sequence as the reference),
// and the updated params are all-gathered to every rank.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "reference/config.h"

namespace shardcheck {

// Newton–Schulz of docs/optimizers.md on a 2-D fp32 matrix; returns fp32.
at::Tensor OrthogonalizeNewtonSchulz(const at::Tensor& g, const OptimizerConfig& c);

// One Muon update of a whole param owned by this rank: `main` and
// `momentum` (fp32, model shape) are replaced by their updated values.
void LayerWiseMuonUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& main,
                         const at::Tensor& grad, at::Tensor& momentum);

}  // namespace shardcheck
