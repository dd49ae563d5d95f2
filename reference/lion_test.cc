// Lion: hand-computed known answers. Every value is a short binary fraction
// (lr = 2^-4, beta1 = 1/2, beta2 = 3/4, decay factor 7/8), so each op is
// exact and the expected numbers below were worked out by hand.
#include <gtest/gtest.h>

#include "reference/registry.h"
#include "spec/config.h"

namespace shardcheck {
namespace {

OptimizerConfig HandConfig(double wd) {
  OptimizerConfig c = OptimizerConfig::Defaults("lion");
  c.Set("lr", 0.0625);
  c.Set("beta1", 0.5);
  c.Set("beta2", 0.75);
  c.Set("weight_decay", wd);
  return c;
}

// One update through the registered reference.
void LionUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& p, const at::Tensor& g,
                at::Tensor& m) {
  std::vector<at::Tensor> state = {m};
  ReferenceStep(c, wd_mult, 1, 1.0, p, g, state);
  m = state[0];
}

at::Tensor T(std::vector<float> v) { return at::tensor(v, at::kFloat); }

void ExpectExactly(const at::Tensor& got, std::vector<float> want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[static_cast<int64_t>(i)].item<float>(), want[i]) << what << "[" << i << "]";
}

// Gradients of three steps. Element 1 at step 2: c = 0 with the old moment,
// but not with the new one (catches a moment updated before `c`). Element 0
// at step 2: g < 0 but the old moment makes c > 0. Element 2: g = m = 0
// always, so c = 0 and it never takes a signed step.
const std::vector<std::vector<float>> kGrads = {
    {1, -2, 0, 0.5, -1}, {-0.125, 0.5, 0, -0.125, 1}, {0, 0, 0, 0, -0.5}};

TEST(Lion, KnownAnswersWithoutWeightDecay) {
  const OptimizerConfig c = HandConfig(0.0);
  at::Tensor p = T({1, 1, 1, -1, 0.5});
  at::Tensor m = at::zeros({5});
  LionUpdate(c, 1.0, p, T(kGrads[0]), m);
  ExpectExactly(p, {0.9375, 1.0625, 1, -1.0625, 0.5625}, "p1");
  ExpectExactly(m, {0.25, -0.5, 0, 0.125, -0.25}, "m1");
  LionUpdate(c, 1.0, p, T(kGrads[1]), m);
  ExpectExactly(p, {0.875, 1.0625, 1, -1.0625, 0.5}, "p2");
  ExpectExactly(m, {0.15625, -0.25, 0, 0.0625, 0.0625}, "m2");
  LionUpdate(c, 1.0, p, T(kGrads[2]), m);
  ExpectExactly(p, {0.8125, 1.125, 1, -1.125, 0.5625}, "p3");
  ExpectExactly(m, {0.1171875, -0.1875, 0, 0.046875, -0.078125}, "m3");
}

TEST(Lion, KnownAnswersWithWeightDecay) {
  const OptimizerConfig c = HandConfig(2.0);  // 1 - lr*wd = 0.875
  at::Tensor p = T({1, 1, 1, -1, 0.5});
  at::Tensor m = at::zeros({5});
  LionUpdate(c, 1.0, p, T(kGrads[0]), m);
  ExpectExactly(p, {0.8125, 0.9375, 0.875, -0.9375, 0.5}, "p1");
  LionUpdate(c, 1.0, p, T(kGrads[1]), m);
  ExpectExactly(p, {0.6484375, 0.8203125, 0.765625, -0.8203125, 0.375}, "p2");
  LionUpdate(c, 1.0, p, T(kGrads[2]), m);
  ExpectExactly(p, {0.5048828125, 0.7802734375, 0.669921875, -0.7802734375, 0.390625}, "p3");
  // The moment does not see weight decay.
  ExpectExactly(m, {0.1171875, -0.1875, 0, 0.046875, -0.078125}, "m3");
}

TEST(Lion, WdMultZeroSkipsDecay) {
  const OptimizerConfig c = HandConfig(2.0);
  at::Tensor p = T({1, 1, 1, -1, 0.5});
  at::Tensor m = at::zeros({5});
  LionUpdate(c, 0.0, p, T(kGrads[0]), m);
  ExpectExactly(p, {0.9375, 1.0625, 1, -1.0625, 0.5625}, "p1");
}

// With wd = 0 every element moves by exactly lr where c != 0, and not at all
// where c == 0. Params are multiples of lr so the subtraction is exact.
TEST(Lion, StepIsExactlyLrWhereSignIsNonZero) {
  OptimizerConfig c = OptimizerConfig::Defaults("lion");
  c.Set("lr", 0x1p-10);
  at::manual_seed(0);
  at::Tensor p = at::randint(-4096, 4096, {10000}, at::kFloat) * static_cast<float>(c.lr());
  at::Tensor m = at::randn({10000});
  m.index_put_({at::indexing::Slice(0, 100)}, 0.0f);
  at::Tensor g = at::randn({10000});
  g.index_put_({at::indexing::Slice(0, 100)}, 0.0f);  // c == 0 for the first 100
  const at::Tensor p_old = p.clone();
  const at::Tensor interp =
      m * static_cast<float>(c.Real("beta1")) + g * static_cast<float>(1 - c.Real("beta1"));
  LionUpdate(c, 1.0, p, g, m);
  const at::Tensor step = (p - p_old).abs();
  const at::Tensor moved = interp != 0;
  EXPECT_TRUE(step.masked_select(moved).eq(static_cast<float>(c.lr())).all().item<bool>());
  EXPECT_TRUE(step.masked_select(~moved).eq(0.0f).all().item<bool>());
  EXPECT_EQ(moved.logical_not().sum().item<int64_t>(), 100);
}

}  // namespace
}  // namespace shardcheck
