// Reference Adam (L2 weight decay) and AdamW (decoupled weight decay).
//
// This is the readable reference: the update is written as plain tensor ops,
// one IEEE fp32 op each, in exactly the order of docs/optimizers.md
// (Kingma & Ba, "Adam", 2015; Loshchilov & Hutter, "Decoupled Weight Decay
// Regularization", 2019; PyTorch's Adam/AdamW docs for the step order). Its
// fp32 scalars are the registry entry's (optimizers/adam.h).
#include "optimizers/adam.h"

#include "reference/registry.h"
#include "kernels/ieee.h"

namespace shardcheck {

namespace {

template <bool kDecoupled>
void AdamUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g_in, StateRefs& state) {
  const AdamScalars s = AdamKernel<kDecoupled>::Prepare(ctx);
  at::Tensor& exp_avg = state["exp_avg"];
  at::Tensor& exp_avg_sq = state["exp_avg_sq"];
  at::Tensor g = g_in;
  if (s.decay) {
    if (kDecoupled) {
      // Decoupled weight decay: one multiply.
      p = p * s.decay_factor;
    } else {
      // L2: fold the decay into the gradient.
      g = g + p * s.wd;
    }
  }
  // Update the first moment.
  exp_avg = exp_avg * s.b1 + g * s.omb1;
  // Update the second moment.
  exp_avg_sq = exp_avg_sq * s.b2 + (g * g) * s.omb2;
  // Bias-correct the second moment inside the denominator.
  const at::Tensor denom = Divide(CorrectlyRoundedSqrt(exp_avg_sq), s.bc2_sqrt) + s.eps;
  // Bias-corrected step.
  p = p - (exp_avg / denom) * s.step_size;
}

}  // namespace

SHARDCHECK_REGISTER_REFERENCES(adam) {
  RegisterReferenceUpdate("adam", &AdamUpdate<false>);
  RegisterReferenceUpdate("adamw", &AdamUpdate<true>);
}

}  // namespace shardcheck
