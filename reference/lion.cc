// Reference Lion (Chen et al., "Symbolic Discovery of Optimization
// Algorithms", 2023; the authors' code and Megatron-LM's defaults).
//
// Plain tensor ops in the order of docs/optimizers.md. Lion keeps one
// moment, exp_avg: the interpolation `c` that picks the sign is made from
// the old moment, which is updated with beta2 afterwards. sign(0) = 0, so an
// element with c == 0 does not move (apart from weight decay). Its fp32
// scalars are the registry entry's (optimizers/lion.h).
#include "optimizers/lion.h"

#include "reference/registry.h"

namespace shardcheck {

namespace {

void LionUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g, StateRefs& state) {
  const LionScalars s = LionKernelT<false>::Prepare(ctx);  // no silent bugs in the reference
  at::Tensor& exp_avg = state["exp_avg"];
  // Decoupled weight decay: one multiply.
  if (s.decay) p = p * s.decay_factor;
  // Interpolate with the old moment; only its sign is used.
  const at::Tensor interp = exp_avg * s.b1 + g * s.omb1;
  // Signed step of size lr (0 where the interpolation is exactly 0).
  p = p - interp.sign() * s.lr;
  // Update the moment with beta2.
  exp_avg = exp_avg * s.b2 + g * s.omb2;
}

}  // namespace

SHARDCHECK_REGISTER_REFERENCES(lion) { RegisterReferenceUpdate("lion", &LionUpdate); }

}  // namespace shardcheck
