// Reference AdEMAMix (Pagliardini, Ablin & Grangier, "The AdEMAMix
// Optimizer: Better, Faster, Older", 2024), without the paper's alpha and
// beta3 warm-up schedulers.
//
// Three moments: Adam's fast one (beta1), a slow one (beta3) that keeps old
// gradients, and the second moment (beta2). Plain tensor ops in the order of
// docs/optimizers.md. Its fp32 scalars are the registry entry's
// (optimizers/ademamix.h).
#include "optimizers/ademamix.h"

#include "reference/registry.h"
#include "kernels/ieee.h"

namespace shardcheck {

namespace {

void AdemamixUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g, StateRefs& state) {
  const AdemamixScalars s = AdemamixKernel::Prepare(ctx);
  at::Tensor& fast = state["exp_avg_fast"];
  at::Tensor& slow = state["exp_avg_slow"];
  at::Tensor& sq = state["exp_avg_sq"];
  // Decoupled weight decay: one multiply.
  if (s.decay) p = p * s.decay_factor;
  // The fast moment, the slow moment, the second moment.
  fast = fast * s.b1 + g * s.omb1;
  slow = slow * s.b3 + g * s.omb3;
  sq = sq * s.b2 + (g * g) * s.omb2;
  // Bias-correct the second moment inside the denominator.
  const at::Tensor denom = Divide(CorrectlyRoundedSqrt(sq), s.bc2_sqrt) + s.eps;
  // Bias-correct the fast moment, mix in the slow one, step.
  const at::Tensor u = (Divide(fast, s.bc1) + slow * s.alpha) / denom;
  p = p - u * s.lr;
}

}  // namespace

SHARDCHECK_REGISTER_REFERENCES(ademamix) { RegisterReferenceUpdate("ademamix", &AdemamixUpdate); }

}  // namespace shardcheck
