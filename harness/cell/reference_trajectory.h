// The reference run of a cell, recorded once: the reference optimizer on
// the full model over all M micro-batches, with a model-space snapshot
// after every step, the loss and the grad norm. Distributed ranks compare
// against it (ranks as threads share one trajectory).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/models/grad_reduction.h"
#include "harness/models/grad_source.h"
#include "spec/config.h"
#include "spec/state_dict.h"

namespace shardcheck {

struct ReferenceTrajectory {
  // snapshots[s]: the state after step s (s = 0: initial), in the layout of
  // ReferenceOptimizer::GetStateDict ("param.", "main_param." for non-fp32,
  // "state.<key>.").
  std::vector<StateDict> snapshots;
  std::vector<double> loss;       // loss[s-1]: mean micro-batch loss of step s (NaN without loss)
  std::vector<double> grad_norm;  // grad_norm[s-1]: the reference optimizer's (before clipping)
  // gradient_norm[s-1]: the same norm computed independently of every
  // optimizer's code, element by element from the step's global gradients
  // (the oracle's, for oracle models): sqrt of the fp64 sum of double(g)^2
  // in param order, then element order (IndependentGradNorm).
  std::vector<double> gradient_norm;
  std::vector<double> lr;         // lr[s-1]: the main child's lr of step s

  int64_t steps() const { return static_cast<int64_t>(loss.size()); }
};

// The tensors themselves where on the host, else host copies (gradient
// sources compute on the host).
std::vector<at::Tensor> HostCopies(const std::vector<at::Tensor>& tensors);

// sqrt(sum over params, then elements, of double(g)^2), a plain loop over
// the fp32 values: the check "against: gradients" (docs/scenarios.md)
// compares every side's grad norm with it.
double IndependentGradNorm(const std::vector<at::Tensor>& grads);

// Runs the reference for `steps` steps on `device` (the gradient source
// computes on the host; snapshots are host copies), its gradients reduced
// over all M micro-batches as `reduction` says (harness/models/grad_reduction.h).
// Throws Error on invalid setups.
ReferenceTrajectory RunReferenceTrajectory(const GradSource& source, const OptimizerSetup& setup,
                                           c10::ScalarType dtype, int steps, int micro_batches,
                                           at::Device device = at::kCPU,
                                           GradReduction reduction = GradReduction::kFp32);

}  // namespace shardcheck
