// Every elementwise kind's fused shard kernel against its reference update,
// on the same inputs: bitwise equal params and state after several steps,
// with and without weight decay and under an lr schedule factor; and the
// model-param write-back equals the param rounded as ATen rounds it. The
// kinds come from the registry, so a new optimizer is covered here without
// a line of this file. FusedKernelBranches runs the same check for every
// branch case the registry's declarations generate (testing/branch_cases.h:
// each bool flipped, each other choice, another value of each number), so
// a code path that only a hyperparameter picks (SGD's Nesterov look-ahead)
// is held to the reference as well.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "reference/registry.h"
#include "spec/config.h"
#include "spec/registry.h"
#include "testing/branch_cases.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

// The config the tables start from: the kind's defaults with weight decay
// on and an lr that moves params visibly.
OptimizerConfig BaseConfig(const std::string& kind) {
  OptimizerConfig c = OptimizerConfig::Defaults(kind);
  c.Set("weight_decay", 0.05);
  c.Set("lr", 1e-2);
  return c;
}

// Six steps of `c`'s fused kernel and of its reference update, from the same
// param and zero state: bitwise equal after every step. `label` names the
// case in failures.
void ExpectFusedEqualsReference(const OptimizerConfig& c, const std::string& label) {
  const OptimizerEntry& entry = FindOptimizer(c.kind());
  const int64_t n = 4099;  // not a multiple of any vector width
  const size_t keys = entry.spec.schema.keys.size();
  for (double wd_mult : {1.0, 0.0}) {
    at::Tensor p = InitialParam(5, 0, {n}, at::kFloat);
    at::Tensor fp = p.clone();
    std::vector<at::Tensor> state(keys), fstate(keys);
    for (size_t k = 0; k < keys; ++k) {
      state[k] = at::zeros({n});
      fstate[k] = at::zeros({n});
    }
    at::Tensor model_bf16 = at::zeros({n}, at::kBFloat16), model_fp32 = at::zeros({n});
    for (int64_t t = 1; t <= 6; ++t) {
      const double factor = t <= 3 ? 0.5 : 1.0;  // a schedule that moves
      const at::Tensor g = GlobalGrad(5, static_cast<uint64_t>(t), 0, {n}, 24);
      ReferenceStep(c, wd_mult, t, factor, p, g, state);
      ScalarBlock scalars;
      entry.elementwise.prepare({&c, t, c.lr() * factor, c.weight_decay() * wd_mult}, scalars);
      ElementwiseSpan span;
      span.numel = n;
      span.main = fp.data_ptr<float>();
      span.grad = g.data_ptr<float>();
      for (size_t k = 0; k < keys; ++k) span.state[k] = fstate[k].data_ptr<float>();
      if (t % 2 == 0)
        span.model_bf16 = reinterpret_cast<uint16_t*>(model_bf16.data_ptr<at::BFloat16>());
      else
        span.model_fp32 = model_fp32.data_ptr<float>();
      entry.elementwise.run_cpu(scalars, span);
      ASSERT_TRUE(SameBytes(fp, p))
          << label << ": params differ at step " << t << ", wd_mult " << wd_mult;
      for (size_t k = 0; k < keys; ++k)
        ASSERT_TRUE(SameBytes(fstate[k], state[k]))
            << label << ": " << entry.spec.schema.keys[k].name << " differs at step " << t;
      if (t % 2 == 0)
        ASSERT_TRUE(SameBytes(model_bf16, p.to(at::kBFloat16))) << "bf16 write-back at step " << t;
      else
        ASSERT_TRUE(SameBytes(model_fp32, p)) << "fp32 write-back at step " << t;
    }
  }
}

class FusedKernel : public testing::TestWithParam<std::string> {};

TEST_P(FusedKernel, BitwiseEqualToTheReferenceUpdate) {
  ExpectFusedEqualsReference(BaseConfig(GetParam()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registry, FusedKernel, testing::ValuesIn(ElementwiseKinds()),
                         [](const auto& info) { return info.param; });

// Every generated case of a kind but `defaults` (which FusedKernel runs),
// each set over the base config (a weight-decay or lr case replaces the
// base's value). One test per kind; a failure names the case.
class FusedKernelBranches : public testing::TestWithParam<std::string> {};

TEST_P(FusedKernelBranches, BitwiseEqualToTheReferenceUpdate) {
  for (const BranchCase& b : BranchCases(GetParam())) {
    if (b.IsDefaults()) continue;
    OptimizerConfig c = BaseConfig(GetParam());
    b.ApplyTo(c);
    ExpectFusedEqualsReference(c, GetParam() + " branch case " + b.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, FusedKernelBranches, testing::ValuesIn(ElementwiseKinds()),
                         [](const auto& info) { return info.param; });

TEST(RoundToBf16, MatchesAtenOnEdgeValues) {
  const std::vector<float> values = {0.0f,       -0.0f,       1.0f,     1.00390625f,
                                     1.0078125f, 1.01171875f, 3.0e38f,  -3.4e38f,
                                     1e-40f,     -1e-45f,     65504.0f, 0.1f};
  for (float v : values) {
    const at::Tensor t = at::full({1}, v);
    uint16_t want;
    std::memcpy(&want, t.to(at::kBFloat16).data_ptr(), 2);
    EXPECT_EQ(RoundToBf16(v), want) << v;
  }
}

}  // namespace
}  // namespace shardcheck
