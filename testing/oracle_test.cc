// The gradient oracle: fixed known values (from an independent Python
// implementation of docs/oracle.md) and the exactness property.
#include "testing/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace shardcheck {
namespace {

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

TEST(Oracle, SplitMix64KnownValues) {
  EXPECT_EQ(SplitMix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(SplitMix64(1), 0x910A2DEC89025CC1ull);
}

struct Known {
  uint64_t seed, step, mb, pid, e;
  uint64_t key;
  int32_t draw;
};

TEST(Oracle, KeysAndDrawsMatchIndependentImplementation) {
  const Known known[] = {
      {1234, 1, 0, 0, 0, 0x2848592887fb0555ull, 16009},
      {1234, 1, 23, 5, 17, 0xeefee57dfc72bc2bull, -2036},
      {7, 3, 11, 2, 1000, 0x16c19fee792c7e69ull, 3886},
      {0, 12, 5, 30, 4095, 0xe1a45efdc9814f2bull, -12497},
      {1234, 0, 0xFFFFFFFF, 0, 0, 0x91f381b5922e556aull, 5981},
      {1234, 0, 0xFFFFFFFF, 3, 63, 0x9211d2ff436c3058ull, 7369},
  };
  for (const Known& k : known) {
    EXPECT_EQ(OracleKey(k.seed, k.step, k.mb, k.pid), k.key) << k.seed << "/" << k.step;
    EXPECT_EQ(OracleDraw(k.key, k.e), k.draw) << k.seed << "/" << k.step;
  }
}

TEST(Oracle, MicroBatchGradAndInitialParamValues) {
  // g = float(draw * M) * 2^-24 ; p0 = float(draw) * 2^-15.
  at::Tensor g = MicroBatchGrad(1234, 1, 23, 5, {4, 8}, 24);
  EXPECT_EQ(g.flatten()[17].item<float>(), -2036 * 24 * 0x1p-24f);
  at::Tensor p = InitialParam(1234, 3, {64}, at::kFloat);
  EXPECT_EQ(p[63].item<float>(), 7369 * 0x1p-15f);
  at::Tensor pb = InitialParam(1234, 3, {64}, at::kBFloat16);
  EXPECT_EQ(pb.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(SameBytes(pb, p.to(at::kBFloat16)));
}

TEST(Oracle, DrawsCoverTheirRange) {
  int32_t lo = 0, hi = 0;
  const uint64_t key = OracleKey(1, 2, 3, 4);
  for (uint64_t e = 0; e < 200000; ++e) {
    lo = std::min(lo, OracleDraw(key, e));
    hi = std::max(hi, OracleDraw(key, e));
  }
  EXPECT_EQ(lo, -16384);
  EXPECT_EQ(hi, 16383);
}

// The global gradient is bitwise the same for any grouping of micro-batches
// into DP ranks and any order of summing the ranks' partial sums.
TEST(Oracle, ExactForEveryDpSizeAndOrder) {
  const int M = 24;
  const std::vector<int64_t> shape = {37, 29};
  for (uint64_t pid : {0, 7}) {
    const at::Tensor global = GlobalGrad(99, 3, pid, shape, M);
    for (int dp : {1, 2, 3, 4, 6, 8, 12, 24}) {
      std::vector<at::Tensor> parts;
      for (int r = 0; r < dp; ++r)
        parts.push_back(PartialGrad(99, 3, pid, shape, M, r * M / dp, (r + 1) * M / dp));
      std::vector<int> order(static_cast<size_t>(dp));
      std::iota(order.begin(), order.end(), 0);
      std::mt19937 rng(static_cast<unsigned>(dp));
      for (int trial = 0; trial < 3; ++trial) {
        std::shuffle(order.begin(), order.end(), rng);
        at::Tensor sum = at::zeros(shape, at::kFloat);
        for (int r : order) sum = sum + parts[static_cast<size_t>(r)];
        EXPECT_TRUE(SameBytes(sum, global)) << "dp " << dp << " pid " << pid;
      }
    }
  }
}

TEST(Oracle, MicroBatchOrderDoesNotMatter) {
  const int M = 32;
  const std::vector<int64_t> shape = {513};
  std::vector<int> order(M);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(5);
  std::shuffle(order.begin(), order.end(), rng);
  at::Tensor sum = at::zeros(shape, at::kFloat);
  for (int mb : order) sum = sum + MicroBatchGrad(5, 9, static_cast<uint64_t>(mb), 2, shape, M);
  sum = sum / static_cast<float>(M);
  EXPECT_TRUE(SameBytes(sum, GlobalGrad(5, 9, 2, shape, M)));
}

// The zero mask, written out from docs/oracle.md independently of
// testing/oracle.cc.
uint64_t IndependentSplitMix64(uint64_t x) {
  x = x + 0x9E3779B97F4A7C15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool IndependentMasked(uint64_t seed, uint64_t step, uint64_t pid, uint64_t e) {
  uint64_t key = IndependentSplitMix64(seed);
  key = IndependentSplitMix64(key ^ step);
  key = IndependentSplitMix64(key ^ 0xFFFFFFFEull);
  key = IndependentSplitMix64(key ^ pid);
  return (IndependentSplitMix64(key ^ e) >> 61) == 0;
}

TEST(OracleZeroMask, MatchesAnIndependentScalarImplementation) {
  const std::vector<int64_t> shape = {64, 64};
  for (uint64_t seed : {0ull, 7ull, 1234ull, 0xFFFFFFFFFFFFFFFFull})
    for (uint64_t step : {1ull, 2ull, 12ull, 1000ull})
      for (uint64_t pid : {0ull, 3ull, 30ull}) {
        const at::Tensor mask = OracleMask(seed, step, pid, shape);
        ASSERT_EQ(mask.scalar_type(), at::kBool);
        ASSERT_EQ(mask.sizes(), at::IntArrayRef(shape));
        const bool* m = mask.data_ptr<bool>();
        for (uint64_t e = 0; e < 4096; ++e) {
          const bool want = IndependentMasked(seed, step, pid, e);
          ASSERT_EQ(OracleMasked(seed, step, pid, e), want)
              << seed << "/" << step << "/" << pid << "/" << e;
          ASSERT_EQ(m[e], want) << seed << "/" << step << "/" << pid << "/" << e;
        }
      }
}

// Masked indices below 64 and counts below 100000, from an independent
// Python implementation of docs/oracle.md.
TEST(OracleZeroMask, KnownValues) {
  struct Case {
    uint64_t seed, step, pid;
    std::vector<uint64_t> first;
    int64_t count;
  };
  const Case cases[] = {
      {1234, 1, 0, {2, 4, 6, 10, 20, 27, 44, 47, 60}, 12346},
      {1234, 2, 0, {9, 10, 14, 33, 35, 40, 41, 48, 51, 56}, 12437},
      {7, 3, 2, {9, 40, 50, 60}, 12476},
  };
  for (const Case& c : cases) {
    std::vector<uint64_t> first;
    for (uint64_t e = 0; e < 64; ++e)
      if (OracleMasked(c.seed, c.step, c.pid, e)) first.push_back(e);
    EXPECT_EQ(first, c.first) << c.seed << "/" << c.step << "/" << c.pid;
    EXPECT_EQ(OracleMask(c.seed, c.step, c.pid, {100000}).sum().item<int64_t>(), c.count);
  }
  EXPECT_EQ(kMaskMicroBatch, 0xFFFFFFFEull);
  EXPECT_EQ(OracleKey(1234, 1, kMaskMicroBatch, 0), 0x9d7fb601c4672767ull);
}

TEST(OracleZeroMask, MasksAboutOneElementInEight) {
  const int64_t n = int64_t{1} << 20;
  // Binomial(n, 1/8): sd = sqrt(n * 7/64) ~ 339; allow 6 sd.
  const double sd = std::sqrt(static_cast<double>(n) * 7.0 / 64.0);
  for (uint64_t step : {1ull, 2ull, 3ull}) {
    const int64_t masked = OracleMask(42, step, 5, {n}).sum().item<int64_t>();
    EXPECT_LT(std::abs(static_cast<double>(masked) - static_cast<double>(n) / 8.0), 6.0 * sd)
        << "step " << step << ": " << masked << " of " << n;
  }
}

// Masked elements are +0 in every micro-batch, every partial sum and the
// global gradient; the set changes from step to step.
TEST(OracleZeroMask, MaskedElementsAreZeroEverywhereWithANewSetEachStep) {
  const int M = 24;
  const std::vector<int64_t> shape = {37, 29};
  const at::Tensor zeros = at::zeros(shape, at::kFloat);
  std::vector<at::Tensor> masks;
  for (uint64_t step = 1; step <= 4; ++step) {
    const at::Tensor mask = OracleMask(99, step, 3, shape);
    ASSERT_GT(mask.sum().item<int64_t>(), 0);
    for (int mb = 0; mb < M; ++mb) {
      const at::Tensor g = MicroBatchGrad(99, step, static_cast<uint64_t>(mb), 3, shape, M, true);
      EXPECT_TRUE(SameBytes(at::where(mask, g, zeros), zeros)) << "step " << step << " mb " << mb;
    }
    const at::Tensor global = GlobalGrad(99, step, 3, shape, M, true);
    EXPECT_TRUE(SameBytes(at::where(mask, global, zeros), zeros)) << "step " << step;
    // Unmasked elements are nonzero almost always: the mask is what zeroes.
    EXPECT_GT(global.ne(0).sum().item<int64_t>(), (~mask).sum().item<int64_t>() * 9 / 10);
    for (const at::Tensor& earlier : masks) {
      EXPECT_FALSE(mask.equal(earlier)) << "step " << step;
      // Independent sets: the overlap is about 1/64 of the elements, far
      // below the 1/8 each step masks.
      EXPECT_LT((mask & earlier).sum().item<int64_t>(), mask.sum().item<int64_t>() / 2);
    }
    masks.push_back(mask);
  }
}

// Elsewhere the masked oracle has the unmasked oracle's bits, for micro-batch
// gradients, partial sums and the global gradient; exactness still holds.
TEST(OracleZeroMask, UnmaskedElementsMatchTheUnmaskedOracleBitwise) {
  const int M = 24;
  const std::vector<int64_t> shape = {513};
  const at::Tensor zeros = at::zeros(shape, at::kFloat);
  for (uint64_t step : {1ull, 2ull, 7ull}) {
    for (uint64_t pid : {0ull, 4ull}) {
      const at::Tensor mask = OracleMask(11, step, pid, shape);
      for (uint64_t mb : {0ull, 5ull, 23ull}) {
        const at::Tensor plain = MicroBatchGrad(11, step, mb, pid, shape, M);
        EXPECT_TRUE(SameBytes(plain, MicroBatchGrad(11, step, mb, pid, shape, M, false)));
        EXPECT_TRUE(SameBytes(MicroBatchGrad(11, step, mb, pid, shape, M, true),
                              at::where(mask, zeros, plain)));
      }
      for (int dp : {1, 2, 3, 8}) {
        at::Tensor sum = at::zeros(shape, at::kFloat);
        for (int r = dp - 1; r >= 0; --r) {
          const int b = r * M / dp, e = (r + 1) * M / dp;
          const at::Tensor plain = PartialGrad(11, step, pid, shape, M, b, e);
          const at::Tensor masked = PartialGrad(11, step, pid, shape, M, b, e, true);
          EXPECT_TRUE(SameBytes(masked, at::where(mask, zeros, plain))) << "dp " << dp;
          sum = sum + masked;
        }
        EXPECT_TRUE(SameBytes(sum, GlobalGrad(11, step, pid, shape, M, true))) << "dp " << dp;
      }
      EXPECT_TRUE(SameBytes(GlobalGrad(11, step, pid, shape, M, true),
                            at::where(mask, zeros, GlobalGrad(11, step, pid, shape, M))));
    }
  }
}

}  // namespace
}  // namespace shardcheck
