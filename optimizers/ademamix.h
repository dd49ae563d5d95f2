// AdEMAMix: its registry entry and fused shard kernel (docs/optimizers.md,
// "AdEMAMix"). Pagliardini, Ablin & Grangier, "The AdEMAMix Optimizer:
// Better, Faster, Older", 2024: Adam's fast moment mixed with a slow one
// (beta3), decoupled weight decay; without the paper's alpha / beta3
// warm-up schedulers. The reference is reference/ademamix.cc.
#pragma once

#include <cmath>

#include "kernels/elementwise.h"
#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck {

// Per-step fp32 scalars of one param group (computed in double, rounded once).
struct AdemamixScalars {
  bool decay = false;      // wd != 0
  float decay_factor = 1;  // float(1 - lr*wd)
  float b1 = 0, omb1 = 0, b2 = 0, omb2 = 0, b3 = 0, omb3 = 0;
  float alpha = 0, eps = 0, lr = 0;
  float bc1 = 1;       // float(1 - beta1^t)
  float bc2_sqrt = 1;  // float(sqrt(1 - beta2^t))
};

struct AdemamixKernel {
  using Scalars = AdemamixScalars;
  static constexpr int kStateCount = 3;  // exp_avg_fast, exp_avg_slow, exp_avg_sq

  static Scalars Prepare(const StepContext& ctx) {
    const OptimizerConfig& c = *ctx.config;
    const double beta1 = c.Real("beta1"), beta2 = c.Real("beta2"), beta3 = c.Real("beta3");
    const double t = static_cast<double>(ctx.step);
    Scalars s;
    s.decay = ctx.weight_decay != 0.0;
    s.decay_factor = static_cast<float>(1.0 - ctx.lr * ctx.weight_decay);
    s.b1 = static_cast<float>(beta1);
    s.omb1 = static_cast<float>(1.0 - beta1);
    s.b2 = static_cast<float>(beta2);
    s.omb2 = static_cast<float>(1.0 - beta2);
    s.b3 = static_cast<float>(beta3);
    s.omb3 = static_cast<float>(1.0 - beta3);
    s.alpha = static_cast<float>(c.Real("alpha"));
    s.eps = static_cast<float>(c.Real("eps"));
    s.lr = static_cast<float>(ctx.lr);
    s.bc1 = static_cast<float>(1.0 - std::pow(beta1, t));
    s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
    return s;
  }

  SHARDCHECK_HD static void Update(const Scalars& s, float& p, float g, float* st) {
    if (s.decay) p = p * s.decay_factor;
    // The fast moment (beta1), the slow moment (beta3), the second moment.
    const float f1 = st[0] * s.b1;
    const float f2 = g * s.omb1;
    const float fast = f1 + f2;
    const float s1 = st[1] * s.b3;
    const float s2 = g * s.omb3;
    const float slow = s1 + s2;
    const float gg = g * g;
    const float v1 = st[2] * s.b2;
    const float v2 = gg * s.omb2;
    const float v = v1 + v2;
    // Bias-correct the fast and the second moment; mix in the slow one.
    const float root = std::sqrt(v);
    const float scaled = root / s.bc2_sqrt;
    const float denom = scaled + s.eps;
    const float corrected = fast / s.bc1;
    const float mixed_slow = slow * s.alpha;
    const float mixed = corrected + mixed_slow;
    const float u = mixed / denom;
    const float update = u * s.lr;
    p = p - update;
    st[0] = fast;
    st[1] = slow;
    st[2] = v;
  }
};

inline OptimizerSpec AdemamixSpec() {
  OptimizerSpec s;
  s.name = "ademamix";
  s.title = "AdEMAMix: Adam with a slow second momentum mixed in, decoupled weight decay";
  s.source = "Pagliardini, Ablin & Grangier 2024 (without the alpha/beta3 warm-up)";
  s.schema = {
      {{"exp_avg_fast", c10::kFloat}, {"exp_avg_slow", c10::kFloat}, {"exp_avg_sq", c10::kFloat}}};
  s.hyperparams = {LrParam(1e-3),
                   WeightDecayParam(0.0),
                   BetaParam("beta1", 0.9, "decay of the fast moment"),
                   BetaParam("beta2", 0.999, "decay of the second moment"),
                   BetaParam("beta3", 0.9999, "decay of the slow moment"),
                   RealParam("alpha", 5.0, 0.0, kNoBound, "weight of the slow moment"),
                   EpsParam(1e-8)};
  s.placement = Placement::kElementwise;
  return s;
}

SHARDCHECK_REGISTER_OPTIMIZERS(ademamix) {
  RegisterElementwise<AdemamixKernel>(AdemamixSpec());
}

}  // namespace shardcheck
