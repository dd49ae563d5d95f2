// Lion: its registry entry and fused shard kernel (docs/optimizers.md,
// "Lion"). Chen et al., "Symbolic Discovery of Optimization Algorithms",
// 2023; defaults are Megatron-LM's. The reference is reference/lion.cc.
#pragma once

#include "kernels/elementwise.h"
#include "spec/config.h"
#include "spec/failpoint.h"
#include "spec/registry.h"

namespace shardcheck {

struct LionScalars {
  bool decay = false;      // wd != 0
  float decay_factor = 1;  // float(1 - lr*wd)
  float b1 = 0, omb1 = 0, b2 = 0, omb2 = 0;
  float lr = 0;
  // Silent bugs (docs/detection.md), read once per call by Prepare.
  bool sign_of_updated_moment = false;  // lion_updated_moment_in_sign
  bool sign_zero_is_one = false;        // lion_sign_zero_is_one
};

// kFailpoints: whether the kernel honours the silent bugs above. The
// registered kernel does; the benchmark times it against the one without,
// so the cost of the switches when off is measured (docs/detection.md).
template <bool kFailpoints>
struct LionKernelT {
  using Scalars = LionScalars;
  static constexpr int kStateCount = 1;  // exp_avg

  static Scalars Prepare(const StepContext& ctx) {
    const OptimizerConfig& c = *ctx.config;
    const double beta1 = c.Real("beta1"), beta2 = c.Real("beta2");
    Scalars s;
    s.decay = ctx.weight_decay != 0.0;
    s.decay_factor = static_cast<float>(1.0 - ctx.lr * ctx.weight_decay);
    s.b1 = static_cast<float>(beta1);
    s.omb1 = static_cast<float>(1.0 - beta1);
    s.b2 = static_cast<float>(beta2);
    s.omb2 = static_cast<float>(1.0 - beta2);
    s.lr = static_cast<float>(ctx.lr);
    if (kFailpoints) {
      s.sign_of_updated_moment = FailpointOn("lion_updated_moment_in_sign");
      s.sign_zero_is_one = FailpointOn("lion_sign_zero_is_one");
    }
    return s;
  }

  SHARDCHECK_HD static void Update(const Scalars& s, float& p, float g, float* st) {
    if (s.decay) p = p * s.decay_factor;
    // Interpolate with the old moment; only its sign is used (sign(0) = 0).
    const float c1 = st[0] * s.b1;
    const float c2 = g * s.omb1;
    float c = c1 + c2;
    // Then the moment, with beta2.
    const float m1 = st[0] * s.b2;
    const float m2 = g * s.omb2;
    const float m = m1 + m2;
    if (kFailpoints && s.sign_of_updated_moment) c = m;
    // Branch-free, so the CPU loop vectorizes (the signs are random: branches
    // mispredict): +1, -1 or +0 exactly as the comparisons say, 0 for NaN.
    float sign = static_cast<float>(static_cast<int>(c > 0.0f) - static_cast<int>(c < 0.0f));
    if (kFailpoints && s.sign_zero_is_one)
      sign = static_cast<float>(2 * static_cast<int>(c >= 0.0f) - 1);
    const float update = sign * s.lr;
    p = p - update;
    st[0] = m;
  }
};

using LionKernel = LionKernelT<true>;

inline OptimizerSpec LionSpec() {
  OptimizerSpec s;
  s.name = "lion";
  s.title = "Lion: sign of an interpolated momentum, one moment";
  s.source = "Chen et al. 2023; Megatron-LM defaults";
  s.schema = {{{"exp_avg", c10::kFloat}}};
  s.hyperparams = {
      LrParam(1e-4), WeightDecayParam(0.0),
      BetaParam("beta1", 0.95, "interpolation weight of the old moment in the update's sign"),
      BetaParam("beta2", 0.98, "decay of the moment")};
  s.placement = Placement::kElementwise;
  s.sign_based = true;
  return s;
}

SHARDCHECK_REGISTER_OPTIMIZERS(lion) { RegisterElementwise<LionKernel>(LionSpec()); }

}  // namespace shardcheck
