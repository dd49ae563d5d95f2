// SGD with momentum and L2 weight decay: its registry entry and fused shard
// kernel (docs/optimizers.md, "SGD"). PyTorch's SGD without dampening, with
// the momentum buffer starting at zero (so the first step's buffer is g,
// computed as 0 * mu + g). The reference is reference/sgd.cc.
#pragma once

#include "kernels/elementwise.h"
#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck {

// Per-step fp32 scalars of one param group.
struct SgdScalars {
  bool decay = false;  // wd != 0
  float wd = 0;        // float(wd): the L2 term
  float mu = 0;        // float(momentum)
  float lr = 0;        // float(lr)
  bool nesterov = false;
};

struct SgdKernel {
  using Scalars = SgdScalars;
  static constexpr int kStateCount = 1;  // momentum_buffer

  static Scalars Prepare(const StepContext& ctx) {
    const OptimizerConfig& c = *ctx.config;
    Scalars s;
    s.decay = ctx.weight_decay != 0.0;
    s.wd = static_cast<float>(ctx.weight_decay);
    s.mu = static_cast<float>(c.Real("momentum"));
    s.lr = static_cast<float>(ctx.lr);
    s.nesterov = c.Flag("nesterov");
    return s;
  }

  SHARDCHECK_HD static void Update(const Scalars& s, float& p, float g, float* st) {
    if (s.decay) {
      const float d = p * s.wd;
      g = g + d;
    }
    // The momentum buffer.
    const float b1 = st[0] * s.mu;
    const float b = b1 + g;
    st[0] = b;
    // The direction: Nesterov's look-ahead, or the buffer.
    float d = b;
    if (s.nesterov) {
      const float look = b * s.mu;
      d = g + look;
    }
    const float update = d * s.lr;
    p = p - update;
  }
};

inline OptimizerSpec SgdSpec() {
  OptimizerSpec s;
  s.name = "sgd";
  s.title = "SGD with momentum (optionally Nesterov) and L2 weight decay";
  s.source = "Polyak 1964, Sutskever et al. 2013; PyTorch SGD without dampening";
  s.schema = {{{"momentum_buffer", c10::kFloat}}};
  s.hyperparams = {LrParam(1e-2), WeightDecayParam(0.0),
                   RealParam("momentum", 0.9, 0.0, 1.0, "momentum of the buffer (0: plain SGD)"),
                   BoolParam("nesterov", false, "Nesterov momentum")};
  s.placement = Placement::kElementwise;
  return s;
}

SHARDCHECK_REGISTER_OPTIMIZERS(sgd) {
  RegisterElementwise<SgdKernel>(SgdSpec());
}

}  // namespace shardcheck
