// Reference SGD with momentum and L2 weight decay (PyTorch's SGD without
// dampening; Sutskever et al., "On the importance of initialization and
// momentum in deep learning", 2013, for Nesterov's form).
//
// Plain tensor ops in the order of docs/optimizers.md; the buffer starts at
// zero. Its fp32 scalars are the registry entry's (optimizers/sgd.h).
#include "optimizers/sgd.h"

#include "reference/registry.h"

namespace shardcheck {

namespace {

void SgdUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g_in, StateRefs& state) {
  const SgdScalars s = SgdKernel::Prepare(ctx);
  at::Tensor& buffer = state["momentum_buffer"];
  at::Tensor g = g_in;
  // L2: fold the decay into the gradient.
  if (s.decay) g = g + p * s.wd;
  // Update the momentum buffer.
  buffer = buffer * s.mu + g;
  // Nesterov's look-ahead, or the buffer itself.
  const at::Tensor direction = s.nesterov ? g + buffer * s.mu : buffer;
  // Step.
  p = p - direction * s.lr;
}

}  // namespace

SHARDCHECK_REGISTER_REFERENCES(sgd) { RegisterReferenceUpdate("sgd", &SgdUpdate); }

}  // namespace shardcheck
