// Gradient sources by name: the oracle models (plain and sparse, with the
// zero mask of docs/oracle.md) round-trip their names and give the oracle's
// gradients.
#include "harness/models/grad_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "spec/error.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

TEST(GradSource, OracleNamesRoundTrip) {
  for (const char* name : {"oracle:gpt-tiny", "oracle:mixed-small", "oracle:shapes:a=32x16,b=16",
                           "oracle:sparse-gpt-tiny", "oracle:sparse-mixed-small",
                           "oracle:sparse-shapes:a=32x16,b=16"}) {
    const auto source = MakeGradSource(name, 7);
    EXPECT_EQ(source->name(), name);
    EXPECT_EQ(MakeGradSource(source->name(), 7)->name(), name);
    EXPECT_EQ(source->spec().zero_mask, std::string(name).rfind("oracle:sparse-", 0) == 0) << name;
    EXPECT_FALSE(source->has_loss());
  }
}

TEST(GradSource, UnknownOracleModelsAreErrors) {
  for (const char* bad : {"oracle:sparse-gpt-huge", "oracle:sparse-sparse-mixed-small",
                          "oracle:sparse-", "oracle:sparse-shapes:4x0", "sparse-mixed-small"})
    EXPECT_THROW(MakeGradSource(bad, 7), Error) << bad;
}

// The sparse model's rank gradients over two DP halves sum to the masked
// global gradient bitwise; its initial params are the plain model's.
TEST(GradSource, SparseMixedSmallRankGradsSumToTheMaskedGlobalGradient) {
  const uint64_t seed = 1234;
  const int M = kDefaultMicroBatches;
  const auto sparse = MakeGradSource("oracle:sparse-mixed-small", seed);
  const auto plain = MakeGradSource("oracle:mixed-small", seed);
  const auto& params = sparse->spec().params;
  ASSERT_EQ(params.size(), plain->spec().params.size());
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const auto a = sparse->InitialParams(dtype), b = plain->InitialParams(dtype);
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(SameBytes(a[i], b[i])) << i;
  }
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<at::Tensor> lo, hi, whole;
    EXPECT_EQ(sparse->RankGrads({}, step, 0, M / 2, M, lo), 0.0);
    sparse->RankGrads({}, step, M / 2, M, M, hi);
    ASSERT_EQ(lo.size(), params.size());
    ASSERT_EQ(hi.size(), params.size());
    int64_t zeros = 0, numel = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const uint64_t s = static_cast<uint64_t>(step);
      const at::Tensor global = GlobalGrad(seed, s, i, params[i].shape, M, /*zero_mask=*/true);
      EXPECT_TRUE(SameBytes(lo[i] + hi[i], global)) << params[i].name << " step " << step;
      EXPECT_TRUE(SameBytes(hi[i] + lo[i], global)) << params[i].name << " step " << step;
      const at::Tensor mask = OracleMask(seed, s, i, params[i].shape);
      EXPECT_TRUE(
          SameBytes(at::where(mask, global, at::zeros_like(global)), at::zeros_like(global)))
          << params[i].name << " step " << step;
      zeros += mask.sum().item<int64_t>();
      numel += global.numel();
    }
    // ~1/8 of mixed-small's ~19k elements.
    EXPECT_GT(zeros, numel / 10) << "step " << step;
    EXPECT_LT(zeros, numel / 6) << "step " << step;
    plain->RankGrads({}, step, 0, M, M, whole);
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(
          SameBytes(whole[i], GlobalGrad(seed, static_cast<uint64_t>(step), i, params[i].shape, M)))
          << params[i].name;
  }
}

// A real model's loss is the sum of its micro-batch losses, however the
// micro-batches are split between ranks, and each starts near ln(vocab)
// (docs/models.md): nothing is added to or dropped from the sum.
TEST(GradSource, TinyModelLossIsTheSumOfItsMicroBatchLosses) {
  const int M = 4;
  for (const char* name : {"gpt-tiny", "moe-tiny"}) {
    const auto source = MakeGradSource(name, 11);
    EXPECT_TRUE(source->has_loss()) << name;
    const auto params = source->InitialParams(at::kFloat);
    const int64_t step = 2;
    std::vector<at::Tensor> grads;
    const double whole = source->RankGrads(params, step, 0, M, M, grads);
    double split = 0.0, singles = 0.0;
    for (int mb = 0; mb < M; mb += 2) split += source->RankGrads(params, step, mb, mb + 2, M, grads);
    std::vector<std::vector<at::Tensor>> per_mb;
    for (int mb = 0; mb < M; ++mb) {
      const double one = source->MicroBatchGrads(params, step, mb, mb + 1, M, per_mb);
      ASSERT_EQ(per_mb.size(), 1u);
      EXPECT_EQ(one, source->RankGrads(params, step, mb, mb + 1, M, grads)) << name << " mb " << mb;
      singles += one;
    }
    EXPECT_NEAR(split, whole, 1e-9 * whole) << name;
    EXPECT_NEAR(singles, whole, 1e-9 * whole) << name;
    EXPECT_NEAR(source->MicroBatchGrads(params, step, 0, M, M, per_mb), whole, 1e-9 * whole) << name;
    const double ln_vocab = std::log(static_cast<double>(source->spec().params.front().shape[0]));
    EXPECT_NEAR(whole / M, ln_vocab, 0.25 * ln_vocab) << name;
  }
}

}  // namespace
}  // namespace shardcheck
