// Every elementwise kind's fused kernel split over threads against its
// reference update: bitwise equal params, state and model write-back, at
// sizes that hit vector tails and chunk edges (1, 7, 63, 64, 65, 1,000,003)
// and at 1, 2 and 3 threads, in every instruction-set instance of the loop
// this CPU runs (kernels/cpu_isa.h). The kinds come from the registry.
#include "kernels/parallel_elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <tuple>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_test_util.h"
#include "reference/registry.h"
#include "spec/config.h"
#include "spec/registry.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

TEST(ParallelElementwise, ChunksCoverTheSpanOnce) {
  EXPECT_EQ(ThreadsFor(1000, 4), 1) << "small spans stay on one thread";
  EXPECT_EQ(ThreadsFor(3 * kMinElementsPerThread, 8), 3);
  EXPECT_EQ(ThreadsFor(65, 2, 1), 2);
  EXPECT_EQ(ThreadsFor(10, 0), 1);
  float main[100], grad[100], s0[100];
  ElementwiseSpan span;
  span.numel = 100;
  span.main = main;
  span.grad = grad;
  span.state[0] = s0;
  const ElementwiseSpan sub = SubSpan(span, 64, 36);
  EXPECT_EQ(sub.numel, 36);
  EXPECT_EQ(sub.main, main + 64);
  EXPECT_EQ(sub.grad, grad + 64);
  EXPECT_EQ(sub.state[0], s0 + 64);
  EXPECT_EQ(sub.state[1], nullptr);
  EXPECT_EQ(sub.model_bf16, nullptr);
}

TEST(CpuIsa, TheWidestSupportedSetIsActiveByDefault) {
  const std::vector<CpuIsa> supported = SupportedCpuIsas();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), CpuIsa::kBaseline);
  if (std::getenv("SHARDCHECK_CPU_ISA") == nullptr) {
    EXPECT_EQ(ActiveCpuIsa(), supported.back());
  }
  std::cout << "[ info     ] CPU ISA instances run here:";
  for (CpuIsa isa : supported) std::cout << " " << CpuIsaName(isa);
  std::cout << "\n";
}

// An x86-64 host build (GCC or Clang, not the CUDA build) has a loop
// instance for every set this CPU runs, asked of the CPU here without the
// build's own dispatch switch: a build whose switch is off would still pass
// every bitwise test, on the baseline loop alone.
TEST(CpuIsa, AnX86HostBuildHasAnInstanceForEverySetThisCpuRuns) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(SHARDCHECK_BUILT_WITH_CUDA)
  const std::vector<CpuIsa> supported = SupportedCpuIsas();
  auto has = [&](CpuIsa isa) {
    return std::find(supported.begin(), supported.end(), isa) != supported.end();
  };
  __builtin_cpu_init();
  EXPECT_EQ(has(CpuIsa::kAvx2), __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(has(CpuIsa::kAvx512), __builtin_cpu_supports("avx512f") != 0);
#else
  GTEST_SKIP() << "not an x86-64 host build: the baseline loop only";
#endif
}

// Sets the active instruction set for one test, then restores the previous.
class ActiveIsaScope {
 public:
  explicit ActiveIsaScope(CpuIsa isa) : previous_(ActiveCpuIsa()) { SetActiveCpuIsa(isa); }
  ~ActiveIsaScope() { SetActiveCpuIsa(previous_); }

 private:
  CpuIsa previous_;
};

using Case = std::tuple<std::string, int64_t, int, CpuIsa>;  // kind, numel, threads, ISA

class ThreadedKernel : public testing::TestWithParam<Case> {};

TEST_P(ThreadedKernel, BitwiseEqualToTheReferenceUpdate) {
  const auto& [kind, n, threads, isa] = GetParam();
  const ActiveIsaScope isa_scope(isa);
  const OptimizerEntry& entry = FindOptimizer(kind);
  OptimizerConfig c = OptimizerConfig::Defaults(kind);
  c.Set("weight_decay", 0.05);
  c.Set("lr", 1e-2);
  const size_t keys = entry.spec.schema.keys.size();
  at::Tensor p = InitialParam(7, 0, {n}, at::kFloat);
  at::Tensor fp = p.clone();
  std::vector<at::Tensor> state(keys), fstate(keys);
  for (size_t k = 0; k < keys; ++k) {
    state[k] = at::zeros({n});
    fstate[k] = at::zeros({n});
  }
  at::Tensor model_bf16 = at::zeros({n}, at::kBFloat16), model_fp32 = at::zeros({n});
  // Tiny spans are split too (a minimum of 1 element per thread), so chunk
  // edges fall inside them; the large one uses the production minimum.
  const int64_t min_per_thread = n < kMinElementsPerThread ? 1 : kMinElementsPerThread;
  for (int64_t t = 1; t <= 3; ++t) {
    const at::Tensor g = GlobalGrad(7, static_cast<uint64_t>(t), 0, {n}, 8);
    ReferenceStep(c, 1.0, t, 1.0, p, g, state);
    ScalarBlock scalars;
    entry.elementwise.prepare({&c, t, c.lr(), c.weight_decay()}, scalars);
    ElementwiseSpan span;
    span.numel = n;
    span.main = fp.data_ptr<float>();
    span.grad = g.data_ptr<float>();
    for (size_t k = 0; k < keys; ++k) span.state[k] = fstate[k].data_ptr<float>();
    if (t % 2 == 0)
      span.model_bf16 = reinterpret_cast<uint16_t*>(model_bf16.data_ptr<at::BFloat16>());
    else
      span.model_fp32 = model_fp32.data_ptr<float>();
    RunElementwiseThreads(entry.elementwise, scalars, span, threads, min_per_thread);
    ASSERT_TRUE(SameBytes(fp, p)) << kind << ": params differ at step " << t;
    for (size_t k = 0; k < keys; ++k)
      ASSERT_TRUE(SameBytes(fstate[k], state[k]))
          << kind << ": " << entry.spec.schema.keys[k].name << " differs at step " << t;
    if (t % 2 == 0)
      ASSERT_TRUE(SameBytes(model_bf16, p.to(at::kBFloat16))) << "bf16 write-back, step " << t;
    else
      ASSERT_TRUE(SameBytes(model_fp32, p)) << "fp32 write-back, step " << t;
  }
}

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  return std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param)) + "_t" +
         std::to_string(std::get<2>(info.param)) + "_" + CpuIsaName(std::get<3>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Registry, ThreadedKernel,
                         testing::Combine(testing::ValuesIn(ElementwiseKinds()),
                                          testing::Values<int64_t>(1, 7, 63, 64, 65, 1000003),
                                          testing::Values(1, 2, 3),
                                          testing::ValuesIn(SupportedCpuIsas())),
                         CaseName);

}  // namespace
}  // namespace shardcheck
