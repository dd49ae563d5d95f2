// AdEMAMix: bitwise against an independent scalar implementation of its row
// of docs/optimizers.md (three moments), and, with alpha 0, close to AdamW
// (the same update but for where the bias correction of the fast moment
// rounds).
#include <gtest/gtest.h>

#include <cmath>

#include "reference/registry.h"
#include "spec/config.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

struct Hyper {
  double lr, wd, beta1, beta2, beta3, alpha, eps;
};

// docs/optimizers.md, AdEMAMix, one float op per line (built with
// -ffp-contract=off like the rest of the project).
void ScalarAdemamix(const Hyper& h, int64_t t, float* p, const float* g, float* m1, float* m2,
                    float* v, int64_t n) {
  const double td = static_cast<double>(t);
  const float decay = static_cast<float>(1.0 - h.lr * h.wd);
  const float b1 = static_cast<float>(h.beta1), omb1 = static_cast<float>(1.0 - h.beta1);
  const float b2 = static_cast<float>(h.beta2), omb2 = static_cast<float>(1.0 - h.beta2);
  const float b3 = static_cast<float>(h.beta3), omb3 = static_cast<float>(1.0 - h.beta3);
  const float bc1 = static_cast<float>(1.0 - std::pow(h.beta1, td));
  const float bc2s = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, td)));
  const float alpha = static_cast<float>(h.alpha), eps = static_cast<float>(h.eps);
  const float lr = static_cast<float>(h.lr);
  for (int64_t i = 0; i < n; ++i) {
    if (h.wd != 0.0) p[i] = p[i] * decay;
    float a = b1 * m1[i];
    float b = omb1 * g[i];
    m1[i] = a + b;
    a = b3 * m2[i];
    b = omb3 * g[i];
    m2[i] = a + b;
    const float gg = g[i] * g[i];
    a = b2 * v[i];
    b = omb2 * gg;
    v[i] = a + b;
    const float denom = std::sqrt(v[i]) / bc2s + eps;
    const float fast = m1[i] / bc1;
    const float slow = alpha * m2[i];
    const float u = (fast + slow) / denom;
    const float step = lr * u;
    p[i] = p[i] - step;
  }
}

OptimizerConfig Config(const Hyper& h) {
  OptimizerConfig c = OptimizerConfig::Defaults("ademamix");
  c.Set("lr", h.lr);
  c.Set("weight_decay", h.wd);
  c.Set("beta1", h.beta1);
  c.Set("beta2", h.beta2);
  c.Set("beta3", h.beta3);
  c.Set("alpha", h.alpha);
  c.Set("eps", h.eps);
  return c;
}

class AdemamixCases : public testing::TestWithParam<std::pair<const char*, Hyper>> {};

TEST_P(AdemamixCases, BitwiseAgainstScalarDefinition) {
  const Hyper h = GetParam().second;
  const OptimizerConfig c = Config(h);
  const int64_t n = 4099;
  at::Tensor p = InitialParam(9, 0, {n}, at::kFloat);
  std::vector<at::Tensor> state = {at::zeros({n}), at::zeros({n}), at::zeros({n})};
  at::Tensor sp = p.clone(), s1 = at::zeros({n}), s2 = at::zeros({n}), sv = at::zeros({n});
  for (int64_t t = 1; t <= 25; ++t) {
    const at::Tensor g = GlobalGrad(9, static_cast<uint64_t>(t), 0, {n}, 24);
    ReferenceStep(c, 1.0, t, 1.0, p, g, state);
    ScalarAdemamix(h, t, sp.data_ptr<float>(), g.data_ptr<float>(), s1.data_ptr<float>(),
                   s2.data_ptr<float>(), sv.data_ptr<float>(), n);
    ASSERT_TRUE(at::equal(p, sp)) << "params differ at step " << t;
    ASSERT_TRUE(at::equal(state[0], s1)) << "exp_avg_fast differs at step " << t;
    ASSERT_TRUE(at::equal(state[1], s2)) << "exp_avg_slow differs at step " << t;
    ASSERT_TRUE(at::equal(state[2], sv)) << "exp_avg_sq differs at step " << t;
  }
  // The slow moment really is slower: it has moved less from zero.
  EXPECT_LT(state[1].abs().sum().item<double>(), state[0].abs().sum().item<double>());
}

INSTANTIATE_TEST_SUITE_P(
    Hyperparameters, AdemamixCases,
    testing::Values(std::make_pair("defaults", Hyper{1e-3, 0.0, 0.9, 0.999, 0.9999, 5.0, 1e-8}),
                    std::make_pair("decay", Hyper{1e-3, 0.1, 0.9, 0.999, 0.9999, 5.0, 1e-8}),
                    std::make_pair("fast_slow", Hyper{3e-3, 0.01, 0.8, 0.99, 0.999, 2.0, 1e-6})),
    [](const auto& info) { return std::string(info.param.first); });

// With alpha 0 the slow moment drops out and AdEMAMix is AdamW, except that
// AdamW folds the bias correction of the first moment into its step size
// (lr / (1 - beta1^t)) where AdEMAMix divides the moment: a rounding apart
// per step. Measured over 20 steps: max abs 6e-8; bound 2^-21.
TEST(Ademamix, AlphaZeroIsAdamWUpToRounding) {
  const Hyper h{1e-3, 0.1, 0.9, 0.999, 0.9999, 0.0, 1e-8};
  const OptimizerConfig c = Config(h);
  OptimizerConfig adamw = OptimizerConfig::Defaults("adamw");
  adamw.Set("lr", h.lr);
  adamw.Set("weight_decay", h.wd);
  const int64_t n = 10000;
  at::Tensor p = InitialParam(21, 0, {n}, at::kFloat), q = p.clone();
  std::vector<at::Tensor> sa = {at::zeros({n}), at::zeros({n}), at::zeros({n})};
  std::vector<at::Tensor> sb = {at::zeros({n}), at::zeros({n})};
  double max_abs = 0.0;
  for (int64_t t = 1; t <= 20; ++t) {
    const at::Tensor g = GlobalGrad(21, static_cast<uint64_t>(t), 0, {n}, 24);
    ReferenceStep(c, 1.0, t, 1.0, p, g, sa);
    ReferenceStep(adamw, 1.0, t, 1.0, q, g, sb);
    max_abs = std::max(max_abs, (p - q).abs().max().item<double>());
  }
  std::printf("[ measured ] ademamix (alpha 0) vs adamw, 20 steps: params max abs %.3g\n", max_abs);
  EXPECT_LE(max_abs, 0x1p-21);
  EXPECT_TRUE(at::equal(sa[0], sb[0]));  // the fast moment is AdamW's exp_avg
  EXPECT_TRUE(at::equal(sa[2], sb[1]));  // and exp_avg_sq is the same
}

}  // namespace
}  // namespace shardcheck
