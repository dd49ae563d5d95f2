// Reference Muon (Keller Jordan, "Muon: An optimizer for hidden layers in
// neural networks", 2024; Megatron-LM / Emerging-Optimizers for the scale
// modes and defaults).
//
// Momentum, optional Nesterov, Newton–Schulz orthogonalization of the 2-D
// update, scaled step: plain tensor ops in the order of docs/optimizers.md.
// Newton–Schulz itself and the scalars are shared with the layer-wise fast
// path (kernels/newton_schulz.h, optimizers/muon.h): one definition.
#include "optimizers/muon.h"

#include "reference/registry.h"

namespace shardcheck {

namespace {

void MuonUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g, StateRefs& state) {
  if (p.dim() != 2)
    throw Error("Muon updates 2-D params only, got a " + std::to_string(p.dim()) + "-D one");
  const MuonScalars s = PrepareMuon(ctx, p.size(0), p.size(1));
  at::Tensor& momentum_buffer = state["momentum_buffer"];
  // Decoupled weight decay: one multiply.
  if (s.decay) p = p * s.decay_factor;
  // Momentum.
  momentum_buffer = momentum_buffer * s.mu + g * s.omu;
  // Nesterov look-ahead, or the momentum itself.
  const at::Tensor update = s.nesterov ? momentum_buffer * s.mu + g * s.omu : momentum_buffer;
  // Orthogonalize and take the scaled step.
  p = p - NewtonSchulz(update, s.ns) * s.step;
}

}  // namespace

SHARDCHECK_REGISTER_REFERENCES(muon) { RegisterReferenceUpdate("muon", &MuonUpdate); }

}  // namespace shardcheck
