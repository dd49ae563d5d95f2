// The buffer layout: the worked example of docs/distributed.md as a
// literal test, and properties over random shape lists, bucket sizes and dp.
#include "distributed/layout.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace shardcheck {
namespace {

TEST(Layout, WorkedExampleDp4) {
  // B (300) registered before A (100): laid out A then B.
  const BufferLayout l = BufferLayout::Build({{0, 300}, {1, 100}}, 4, 0);
  ASSERT_EQ(l.buckets().size(), 1u);
  EXPECT_EQ(l.Find(1)->world, (Range{0, 100}));
  EXPECT_EQ(l.Find(0)->world, (Range{128, 428}));
  EXPECT_EQ(l.buckets()[0].world, (Range{0, 512}));
  EXPECT_EQ(l.buckets()[0].numel_unpadded, 428);
  EXPECT_EQ(l.buckets()[0].ShardSize(4), 128);
  const auto r0 = l.SlicesOf(0);
  ASSERT_EQ(r0.size(), 1u);
  EXPECT_EQ(r0[0].param, 1);
  EXPECT_EQ(r0[0].param_range, (Range{0, 100}));
  const std::vector<Range> b_parts = {{0, 128}, {128, 256}, {256, 300}};
  for (int r = 1; r < 4; ++r) {
    const auto s = l.SlicesOf(r);
    ASSERT_EQ(s.size(), 1u) << "rank " << r;
    EXPECT_EQ(s[0].param, 0);
    EXPECT_EQ(s[0].param_range, b_parts[static_cast<size_t>(r - 1)]);
    EXPECT_EQ(s[0].gbuf_local.begin, 0);
  }
  EXPECT_EQ(l.SlicesOf(3)[0].gbuf_world, (Range{384, 428}));
  EXPECT_EQ(l.SlicesOf(3)[0].gbuf_local, (Range{0, 44}));
}

TEST(Layout, BucketClosesWhenItReachesBucketSize) {
  // Reverse order: p2 (100) at [0,100), p1 (100) at [128,228) -> closes (228 >= 200).
  const BufferLayout l = BufferLayout::Build({{0, 50}, {1, 100}, {2, 100}}, 2, 200);
  ASSERT_EQ(l.buckets().size(), 2u);
  EXPECT_EQ(l.buckets()[0].world, (Range{0, 256}));
  EXPECT_EQ(l.buckets()[0].numel_unpadded, 228);
  EXPECT_EQ(l.Find(0)->world, (Range{256, 306}));
  EXPECT_EQ(l.buckets()[1].world, (Range{256, 384}));
  EXPECT_EQ(l.buckets()[1].numel_unpadded, 50);
}

TEST(Layout, BucketEndIsPaddedToLcmOfDpAnd128) {
  const BufferLayout l = BufferLayout::Build({{0, 1000}}, 3, 0);
  EXPECT_EQ(l.buckets()[0].world.size() % 384, 0);
  EXPECT_EQ(l.buckets()[0].world.size(), 1152);
}

TEST(LayerWise, LptAssignsHeaviestFirstToLightestRank) {
  // Costs: 64x64 -> 262144; 32x64 -> 65536; 16x16 -> 4096.
  const std::vector<int> owner =
      AssignLayerWise({{16, 16}, {64, 64}, {32, 64}, {64, 32}, {64, 64}}, 2);
  EXPECT_EQ(owner, (std::vector<int>{0, 0, 0, 1, 1}));
  // Every param is owned by one rank in [0, dp).
  for (int dp = 1; dp <= 8; ++dp)
    for (int o : AssignLayerWise({{3, 4}, {5, 6}, {7, 8}}, dp)) EXPECT_LT(o, dp);
}

class LayoutProperties : public testing::TestWithParam<int> {};

TEST_P(LayoutProperties, EveryElementOwnedOnceAndRangesAgree) {
  std::mt19937 rng(static_cast<unsigned>(GetParam()));
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<BufferParamSpec> params;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const int64_t numel = (rng() % 4 == 0) ? 1 + rng() % 63 : 1 + rng() % 3000;
      params.push_back({i, numel});
    }
    const int dp = 1 + static_cast<int>(rng() % 8);
    const int64_t bucket_size = (rng() % 3 == 0) ? 0 : 64 + rng() % 4000;
    const BufferLayout l = BufferLayout::Build(params, dp, bucket_size);
    const std::string where = "trial " + std::to_string(trial) + " dp " + std::to_string(dp) +
                              " bucket_size " + std::to_string(bucket_size);
    // Reverse order, 64-aligned starts, aligned bucket ends, contiguous buckets.
    ASSERT_EQ(l.params().size(), params.size());
    for (size_t i = 0; i < l.params().size(); ++i) {
      EXPECT_EQ(l.params()[i].param, n - 1 - static_cast<int>(i)) << where;
      EXPECT_EQ(l.params()[i].world.begin % kParamAlignment, 0) << where;
    }
    int64_t expect_start = 0;
    for (const Bucket& b : l.buckets()) {
      EXPECT_EQ(b.world.begin, expect_start) << where;
      EXPECT_EQ(b.world.size() % std::lcm(int64_t{dp}, kBucketAlignment), 0) << where;
      const PlacedParam& last = l.params()[static_cast<size_t>(b.params.back())];
      EXPECT_EQ(b.numel_unpadded, last.world.end - b.world.begin) << where;
      if (bucket_size > 0 && b.index + 1 < static_cast<int>(l.buckets().size())) {
        EXPECT_GE(b.numel_unpadded, bucket_size) << where;
      }
      expect_start = b.world.end;
    }
    EXPECT_EQ(l.numel(), expect_start);
    // Ownership: every real element exactly once; padding by nobody.
    std::vector<int> owners(static_cast<size_t>(l.numel()), 0);
    std::map<int, int64_t> covered;
    for (int r = 0; r < dp; ++r) {
      for (const OwnedSlice& s : l.SlicesOf(r)) {
        const PlacedParam* p = l.Find(s.param);
        ASSERT_NE(p, nullptr);
        const Bucket& b = l.buckets()[static_cast<size_t>(s.bucket)];
        const Range shard = l.ShardRange(s.bucket, r);
        EXPECT_EQ(s.gbuf_world.size(), s.param_range.size());
        EXPECT_EQ(s.gbuf_world.begin - b.world.begin, s.gbuf_world_in_bucket.begin);
        EXPECT_EQ(s.gbuf_world.begin - shard.begin, s.gbuf_local.begin);
        EXPECT_EQ(s.gbuf_world.begin - p->world.begin, s.param_range.begin);
        EXPECT_GE(s.gbuf_local.begin, 0);
        EXPECT_LE(s.gbuf_local.end, b.ShardSize(dp));
        for (int64_t e = s.gbuf_world.begin; e < s.gbuf_world.end; ++e) ++owners[static_cast<size_t>(e)];
        covered[s.param] += s.param_range.size();
      }
    }
    for (const PlacedParam& p : l.params()) {
      EXPECT_EQ(covered[p.param], p.numel) << where;
      for (int64_t e = p.world.begin; e < p.world.end; ++e)
        ASSERT_EQ(owners[static_cast<size_t>(e)], 1) << where << " element " << e;
    }
    int64_t real = 0;
    for (int o : owners) real += o;
    int64_t total = 0;
    for (const auto& p : params) total += p.numel;
    EXPECT_EQ(real, total) << where << ": padding owned";
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, LayoutProperties, testing::Range(1, 6));

}  // namespace
}  // namespace shardcheck
