#include "distributed/shard_update.h"

#include <cmath>

namespace shardcheck {

AdamScalars PrepareAdam(const OptimizerConfig& c, double wd_mult, int64_t step) {
  AdamScalars s;
  const double wd = c.weight_decay * wd_mult;
  const double t = static_cast<double>(step);
  s.decoupled = c.kind == OptimizerKind::kAdamW;
  s.decay = wd != 0.0;
  s.decay_factor = static_cast<float>(1.0 - c.lr * wd);
  s.wd = static_cast<float>(wd);
  s.b1 = static_cast<float>(c.beta1);
  s.omb1 = static_cast<float>(1.0 - c.beta1);
  s.b2 = static_cast<float>(c.beta2);
  s.omb2 = static_cast<float>(1.0 - c.beta2);
  s.eps = static_cast<float>(c.eps);
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, t)));
  s.step_size = static_cast<float>(c.lr / (1.0 - std::pow(c.beta1, t)));
  return s;
}

LionScalars PrepareLion(const OptimizerConfig& c, double wd_mult) {
  LionScalars s;
  const double wd = c.weight_decay * wd_mult;
  s.decay = wd != 0.0;
  s.decay_factor = static_cast<float>(1.0 - c.lr * wd);
  s.b1 = static_cast<float>(c.beta1);
  s.omb1 = static_cast<float>(1.0 - c.beta1);
  s.b2 = static_cast<float>(c.beta2);
  s.omb2 = static_cast<float>(1.0 - c.beta2);
  s.lr = static_cast<float>(c.lr);
  return s;
}

void AdamShardUpdate(const AdamScalars& s, float* __restrict p, const float* __restrict g_in,
                     float* __restrict m, float* __restrict v, int64_t n) {
  const bool l2 = s.decay && !s.decoupled;
  const bool decoupled = s.decay && s.decoupled;
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    float g = g_in[i];
    if (decoupled) pi = pi * s.decay_factor;
    if (l2) {
      const float d = pi * s.wd;
      g = g + d;
    }
    const float m1 = m[i] * s.b1;
    const float m2 = g * s.omb1;
    const float mi = m1 + m2;
    const float gg = g * g;
    const float v1 = v[i] * s.b2;
    const float v2 = gg * s.omb2;
    const float vi = v1 + v2;
    const float root = std::sqrt(vi);
    const float scaled = root / s.bc2_sqrt;
    const float denom = scaled + s.eps;
    const float ratio = mi / denom;
    const float update = ratio * s.step_size;
    p[i] = pi - update;
    m[i] = mi;
    v[i] = vi;
  }
}

void LionShardUpdate(const LionScalars& s, float* __restrict p, const float* __restrict g_in,
                     float* __restrict m, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    const float g = g_in[i];
    if (s.decay) pi = pi * s.decay_factor;
    const float c1 = m[i] * s.b1;
    const float c2 = g * s.omb1;
    const float c = c1 + c2;
    const float sign = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
    const float update = sign * s.lr;
    p[i] = pi - update;
    const float m1 = m[i] * s.b2;
    const float m2 = g * s.omb2;
    m[i] = m1 + m2;
  }
}

}  // namespace shardcheck
