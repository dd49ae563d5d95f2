// The gradient oracle: fixed known values (from an independent Python
// implementation of docs/oracle.md) and the exactness property.
#include "testing/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

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

}  // namespace
}  // namespace shardcheck
