#include "reference/lion.h"

namespace shardcheck {

void LionUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& p, const at::Tensor& g,
                at::Tensor& exp_avg) {
  const double wd = c.weight_decay * wd_mult;
  const float b1 = static_cast<float>(c.beta1);
  const float omb1 = static_cast<float>(1.0 - c.beta1);
  const float b2 = static_cast<float>(c.beta2);
  const float omb2 = static_cast<float>(1.0 - c.beta2);
  const float lr = static_cast<float>(c.lr);

  // Decoupled weight decay: one multiply.
  if (wd != 0.0) p = p * static_cast<float>(1.0 - c.lr * wd);
  // Interpolate with the old moment; only its sign is used.
  at::Tensor interp = exp_avg * b1 + g * omb1;
  // Signed step of size lr (0 where the interpolation is exactly 0).
  p = p - interp.sign() * lr;
  // Update the moment with beta2.
  exp_avg = exp_avg * b2 + g * omb2;
}

}  // namespace shardcheck
