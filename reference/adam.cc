#include "reference/adam.h"

#include <cmath>

namespace shardcheck {

void AdamUpdate(const OptimizerConfig& c, double wd_mult, int64_t t, at::Tensor& p,
                const at::Tensor& g_in, at::Tensor& exp_avg, at::Tensor& exp_avg_sq) {
  // Scalars: computed in double, rounded to fp32 once.
  const double wd = c.weight_decay * wd_mult;
  const float b1 = static_cast<float>(c.beta1);
  const float omb1 = static_cast<float>(1.0 - c.beta1);
  const float b2 = static_cast<float>(c.beta2);
  const float omb2 = static_cast<float>(1.0 - c.beta2);
  const float eps = static_cast<float>(c.eps);
  const double td = static_cast<double>(t);
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, td)));
  const float step_size = static_cast<float>(c.lr / (1.0 - std::pow(c.beta1, td)));

  at::Tensor g = g_in;
  if (wd != 0.0) {
    if (c.kind == OptimizerKind::kAdamW) {
      // Decoupled weight decay: one multiply.
      p = p * static_cast<float>(1.0 - c.lr * wd);
    } else {
      // L2: fold the decay into the gradient.
      g = g + p * static_cast<float>(wd);
    }
  }
  // Update the first moment.
  exp_avg = exp_avg * b1 + g * omb1;
  // Update the second moment.
  exp_avg_sq = exp_avg_sq * b2 + (g * g) * omb2;
  // Bias-correct the second moment inside the denominator.
  at::Tensor denom = exp_avg_sq.sqrt() / bc2_sqrt + eps;
  // Bias-corrected step.
  p = p - (exp_avg / denom) * step_size;
}

}  // namespace shardcheck
