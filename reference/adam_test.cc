// Adam and AdamW: bitwise against an independent scalar implementation of
// docs/optimizers.md, and within a measured bound of libtorch's own
// torch::optim::Adam / AdamW (which round differently: they fuse the moment
// updates into add(alpha)/addcmul and the step into addcdiv).
#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cmath>

#include "reference/registry.h"
#include "spec/config.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

// docs/optimizers.md, Adam/AdamW, one float op per line (this file is built
// with -ffp-contract=off like the rest of the project).
void ScalarAdam(const OptimizerConfig& c, double wd_mult, int64_t t, float* p, const float* g_in,
                float* m, float* v, int64_t n) {
  const double lr = c.lr(), beta1 = c.Real("beta1"), beta2 = c.Real("beta2");
  const double wd = c.weight_decay() * wd_mult;
  const float b1 = static_cast<float>(beta1), omb1 = static_cast<float>(1.0 - beta1);
  const float b2 = static_cast<float>(beta2), omb2 = static_cast<float>(1.0 - beta2);
  const float eps = static_cast<float>(c.Real("eps"));
  const float bc2s = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(t))));
  const float step = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(t))));
  const float decay = static_cast<float>(1.0 - lr * wd);
  const float wdf = static_cast<float>(wd);
  for (int64_t i = 0; i < n; ++i) {
    float g = g_in[i];
    if (wd != 0.0) {
      if (c.kind() == "adamw") {
        p[i] = p[i] * decay;
      } else {
        float d = p[i] * wdf;
        g = g + d;
      }
    }
    float a = m[i] * b1;
    float b = g * omb1;
    m[i] = a + b;
    float gg = g * g;
    float c2 = v[i] * b2;
    float d2 = gg * omb2;
    v[i] = c2 + d2;
    float denom = std::sqrt(v[i]) / bc2s + eps;
    float ratio = m[i] / denom;
    float upd = ratio * step;
    p[i] = p[i] - upd;
  }
}

// One update through the registered reference.
void AdamUpdate(const OptimizerConfig& c, double wd_mult, int64_t t, at::Tensor& p,
                const at::Tensor& g, at::Tensor& m, at::Tensor& v) {
  std::vector<at::Tensor> state = {m, v};
  ReferenceStep(c, wd_mult, t, 1.0, p, g, state);
  m = state[0];
  v = state[1];
}

class AdamBoth : public testing::TestWithParam<std::string> {};

TEST_P(AdamBoth, BitwiseAgainstScalarDefinition) {
  OptimizerConfig c = OptimizerConfig::Defaults(GetParam());
  c.Set("weight_decay", 0.1);
  const int64_t n = 4099;
  at::Tensor p = InitialParam(3, 0, {n}, at::kFloat), m = at::zeros({n}), v = at::zeros({n});
  at::Tensor sp = p.clone(), sm = m.clone(), sv = v.clone();
  for (int64_t t = 1; t <= 20; ++t) {
    const at::Tensor g = GlobalGrad(3, static_cast<uint64_t>(t), 0, {n}, 24);
    AdamUpdate(c, 1.0, t, p, g, m, v);
    ScalarAdam(c, 1.0, t, sp.data_ptr<float>(), g.data_ptr<float>(), sm.data_ptr<float>(),
               sv.data_ptr<float>(), n);
    ASSERT_TRUE(at::equal(p, sp)) << "params differ at step " << t;
    ASSERT_TRUE(at::equal(m, sm)) << "exp_avg differs at step " << t;
    ASSERT_TRUE(at::equal(v, sv)) << "exp_avg_sq differs at step " << t;
  }
}

// 50 steps on oracle gradients against torch::optim. Measured (docs/optimizers.md):
// max |diff| of params 8.9e-8 (adam) and 6.0e-8 (adamw) with lr 1e-3 and
// |p| <= 0.5, i.e. 2-3 ULP of the params; exp_avg_sq max relative diff
// 4.9e-7. Why the bounds hold: PyTorch's fused ops (add with alpha, addcmul,
// addcdiv) round once where we round twice, so each step's update differs by
// a few ULP of the update (~1e-3), and the final p - update may then round
// to a neighbour: at most 1 ULP of p per step. Params do not contract those
// differences, so they walk: 50 steps give at most ~sqrt(50) = 7 ULP in
// expectation of the worst of 1e5 elements; the bound is 16 ULP at
// |p| < 0.5 (2^-21). The moments are contractions (beta < 1), so their
// relative difference stays at a few ULP of fp32 (6e-8 each): bound 4e-6.
TEST_P(AdamBoth, WithinMeasuredBoundOfTorchOptim) {
  OptimizerConfig c = OptimizerConfig::Defaults(GetParam());
  c.Set("weight_decay", GetParam() == "adam" ? 0.01 : 0.1);
  const double lr = c.lr(), beta1 = c.Real("beta1"), beta2 = c.Real("beta2"), eps = c.Real("eps");
  const double wd = c.weight_decay();
  const int64_t n = 100000;
  at::Tensor p = InitialParam(11, 0, {n}, at::kFloat), m = at::zeros({n}), v = at::zeros({n});
  at::Tensor tp = p.clone().set_requires_grad(true);
  std::unique_ptr<torch::optim::Optimizer> torch_opt;
  if (GetParam() == "adam") {
    torch_opt = std::make_unique<torch::optim::Adam>(
        std::vector<at::Tensor>{tp},
        torch::optim::AdamOptions(lr).betas({beta1, beta2}).eps(eps).weight_decay(wd));
  } else {
    torch_opt = std::make_unique<torch::optim::AdamW>(
        std::vector<at::Tensor>{tp},
        torch::optim::AdamWOptions(lr).betas({beta1, beta2}).eps(eps).weight_decay(wd));
  }
  double max_abs = 0.0, max_rel = 0.0;
  for (int64_t t = 1; t <= 50; ++t) {
    const at::Tensor g = GlobalGrad(11, static_cast<uint64_t>(t), 0, {n}, 24);
    AdamUpdate(c, 1.0, t, p, g, m, v);
    tp.mutable_grad() = g.clone();
    torch_opt->step();
    const at::Tensor diff = (p - tp.detach()).abs();
    max_abs = std::max(max_abs, diff.max().item<double>());
    max_rel = std::max(max_rel, (diff / tp.detach().abs().clamp_min(1e-3)).max().item<double>());
  }
  auto& state = torch_opt->state();
  ASSERT_EQ(state.size(), 1u);
  at::Tensor tv;
  if (GetParam() == "adam")
    tv = static_cast<torch::optim::AdamParamState&>(*state.begin()->second).exp_avg_sq();
  else
    tv = static_cast<torch::optim::AdamWParamState&>(*state.begin()->second).exp_avg_sq();
  const double v_rel = ((v - tv).abs() / tv.abs().clamp_min(1e-30)).max().item<double>();
  std::printf(
      "[ measured ] %s vs torch::optim, 50 steps, %ld elements: params max abs %.3g, "
      "max rel %.3g; exp_avg_sq max rel %.3g\n",
      GetParam().c_str(), static_cast<long>(n), max_abs, max_rel, v_rel);
  EXPECT_LE(max_abs, 0x1p-21);  // 16 ULP in [0.25, 0.5)
  EXPECT_LE(v_rel, 4e-6);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AdamBoth, testing::Values("adam", "adamw"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardcheck
