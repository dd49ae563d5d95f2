// Adam (L2 weight decay) and AdamW (decoupled weight decay): their registry
// entries and their fused shard kernel (docs/optimizers.md, "Adam",
// "AdamW"). Kingma & Ba, "Adam", 2015; Loshchilov & Hutter, "Decoupled
// Weight Decay Regularization", 2019. The reference is reference/adam.cc.
#pragma once

#include <cmath>

#include "kernels/elementwise.h"
#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck {

// Per-step fp32 scalars of one param group (computed in double, rounded once).
struct AdamScalars {
  bool decay = false;      // wd != 0
  float decay_factor = 1;  // float(1 - lr*wd): AdamW
  float wd = 0;            // float(wd): Adam's L2 term
  float b1 = 0, omb1 = 0, b2 = 0, omb2 = 0, eps = 0;
  float bc2_sqrt = 1;   // float(sqrt(1 - beta2^t))
  float step_size = 0;  // float(lr / (1 - beta1^t))
};

template <bool kDecoupled>
struct AdamKernel {
  using Scalars = AdamScalars;
  static constexpr int kStateCount = 2;  // exp_avg, exp_avg_sq

  static Scalars Prepare(const StepContext& ctx) {
    const OptimizerConfig& c = *ctx.config;
    const double beta1 = c.Real("beta1"), beta2 = c.Real("beta2");
    const double wd = ctx.weight_decay, t = static_cast<double>(ctx.step);
    Scalars s;
    s.decay = wd != 0.0;
    s.decay_factor = static_cast<float>(1.0 - ctx.lr * wd);
    s.wd = static_cast<float>(wd);
    s.b1 = static_cast<float>(beta1);
    s.omb1 = static_cast<float>(1.0 - beta1);
    s.b2 = static_cast<float>(beta2);
    s.omb2 = static_cast<float>(1.0 - beta2);
    s.eps = static_cast<float>(c.Real("eps"));
    s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
    s.step_size = static_cast<float>(ctx.lr / (1.0 - std::pow(beta1, t)));
    return s;
  }

  SHARDCHECK_HD static void Update(const Scalars& s, float& p, float g, float* st) {
    if (s.decay) {
      if (kDecoupled) {
        p = p * s.decay_factor;
      } else {
        const float d = p * s.wd;
        g = g + d;
      }
    }
    const float m1 = st[0] * s.b1;
    const float m2 = g * s.omb1;
    const float m = m1 + m2;
    const float gg = g * g;
    const float v1 = st[1] * s.b2;
    const float v2 = gg * s.omb2;
    const float v = v1 + v2;
    const float root = std::sqrt(v);
    const float scaled = root / s.bc2_sqrt;
    const float denom = scaled + s.eps;
    const float ratio = m / denom;
    const float update = ratio * s.step_size;
    p = p - update;
    st[0] = m;
    st[1] = v;
  }
};

inline OptimizerSpec AdamSpec(bool decoupled) {
  OptimizerSpec s;
  s.name = decoupled ? "adamw" : "adam";
  s.title = decoupled ? "AdamW: Adam with decoupled weight decay" : "Adam with L2 weight decay";
  s.source =
      decoupled ? "Loshchilov & Hutter 2019; PyTorch AdamW" : "Kingma & Ba 2015; PyTorch Adam";
  s.schema = {{{"exp_avg", c10::kFloat}, {"exp_avg_sq", c10::kFloat}}};
  s.hyperparams = {LrParam(1e-3), WeightDecayParam(decoupled ? 0.01 : 0.0),
                   BetaParam("beta1", 0.9, "decay of the first moment"),
                   BetaParam("beta2", 0.999, "decay of the second moment"), EpsParam(1e-8)};
  s.placement = Placement::kElementwise;
  // As Muon's scalar optimizer, Megatron's Adam decays decoupled.
  if (!decoupled) s.as_scalar = "adamw";
  return s;
}

SHARDCHECK_REGISTER_OPTIMIZERS(adam) {
  RegisterElementwise<AdamKernel<false>>(AdamSpec(false));
  RegisterElementwise<AdamKernel<true>>(AdamSpec(true));
}

}  // namespace shardcheck
