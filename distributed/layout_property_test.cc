// Property tests (RapidCheck) of the buffer layout (distributed/layout.h):
// each invariant that docs/distributed.md, "Buffer layout", states is one
// property, checked over generated param lists (counts below, at and above
// the 64-element alignment), bucket sizes (0: one bucket) and dp 1..256 —
// past the dp 1..4 the scenario matrix runs and the dp 1..8 of
// layout_test.cc, where lcm(dp, 128) padding arithmetic could go wrong
// unseen (docs/detection.md, "Blind spots"). The layout decides which
// element each rank updates and which bytes a checkpoint holds, so an
// off-by-one here corrupts state silently. A failure prints the shrunk
// case (param counts, dp, bucket size).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <utility>
#include <vector>

#include "distributed/layout.h"

namespace shardcheck {
namespace {

struct LayoutCase {
  std::vector<int64_t> numels;  // registration order
  int dp = 1;
  int64_t bucket_size = 0;

  BufferLayout Build() const {
    std::vector<BufferParamSpec> params;
    for (size_t i = 0; i < numels.size(); ++i) params.push_back({static_cast<int>(i), numels[i]});
    return BufferLayout::Build(params, dp, bucket_size);
  }
};

void showValue(const LayoutCase& c, std::ostream& os) {
  os << "numels [";
  for (size_t i = 0; i < c.numels.size(); ++i) os << (i ? ", " : "") << c.numels[i];
  os << "], dp " << c.dp << ", bucket_size " << c.bucket_size;
}

// Param element counts: below the 64-element alignment, exact multiples of
// it, or anything up to a few thousand.
rc::Gen<int64_t> GenParamNumel() {
  return rc::gen::oneOf(
      rc::gen::inRange<int64_t>(1, 64),
      rc::gen::map(rc::gen::inRange<int64_t>(1, 40), [](int64_t k) { return k * kParamAlignment; }),
      rc::gen::inRange<int64_t>(1, 5000));
}

rc::Gen<LayoutCase> GenLayoutCase() {
  return rc::gen::exec([] {
    LayoutCase c;
    const int count = *rc::gen::inRange(1, 25);
    c.numels =
        *rc::gen::container<std::vector<int64_t>>(static_cast<size_t>(count), GenParamNumel());
    c.dp = *rc::gen::oneOf(rc::gen::inRange(1, 9), rc::gen::inRange(1, 257));
    c.bucket_size = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 20000));
    return c;
  });
}

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// docs/distributed.md, "Buffer layout": "Within a buffer, params are laid
// out in reverse registration order."
RC_GTEST_PROP(LayoutProp, ParamsInReverseRegistrationOrder, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  const int n = static_cast<int>(c.numels.size());
  RC_ASSERT(static_cast<int>(l.params().size()) == n);
  for (int i = 0; i < n; ++i) {
    const PlacedParam& p = l.params()[static_cast<size_t>(i)];
    RC_ASSERT(p.param == n - 1 - i);
    RC_ASSERT(p.numel == c.numels[static_cast<size_t>(p.param)]);
    RC_ASSERT(p.world.size() == p.numel);
    if (i > 0) RC_ASSERT(p.world.begin >= l.params()[static_cast<size_t>(i - 1)].world.end);
  }
}

// docs/distributed.md, "Buffer layout": "Each param's start is padded up to
// a multiple of 64 elements" — up from the previous param's end, or from
// its bucket's start for a bucket's first param (no more padding than that).
RC_GTEST_PROP(LayoutProp, ParamStartPaddedUpTo64Elements, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  for (const Bucket& b : l.buckets()) {
    int64_t cursor = b.world.begin;
    for (int pi : b.params) {
      const PlacedParam& p = l.params()[static_cast<size_t>(pi)];
      RC_LOG() << "bucket " << b.index << ", param " << p.param << " at [" << p.world.begin << ", "
               << p.world.end << ")\n";
      RC_ASSERT(p.world.begin % kParamAlignment == 0);
      RC_ASSERT(p.world.begin == RoundUp(cursor, kParamAlignment));
      RC_ASSERT(p.bucket == b.index);
      cursor = p.world.end;
    }
  }
}

// docs/distributed.md, "Buffer layout": "A bucket closes after the param
// whose end makes end − bucket_start ≥ bucket_size (--bucket-size 0: one
// bucket)."
RC_GTEST_PROP(LayoutProp, BucketClosesAfterTheParamReachingBucketSize, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  RC_ASSERT(!l.buckets().empty());
  if (c.bucket_size == 0) RC_ASSERT(l.buckets().size() == 1u);
  size_t placed = 0;
  for (const Bucket& b : l.buckets()) {
    RC_ASSERT(!b.params.empty());
    RC_ASSERT(b.index == static_cast<int>(&b - l.buckets().data()));
    for (size_t i = 0; i < b.params.size(); ++i) {
      const PlacedParam& p = l.params()[static_cast<size_t>(b.params[i])];
      RC_ASSERT(b.params[i] == static_cast<int>(placed++));  // buckets take params in buffer order
      const bool reaches = c.bucket_size > 0 && p.world.end - b.world.begin >= c.bucket_size;
      const bool last_in_bucket = i + 1 == b.params.size();
      const bool last_bucket = b.index + 1 == static_cast<int>(l.buckets().size());
      if (!last_in_bucket) RC_ASSERT(!reaches);
      if (last_in_bucket && !last_bucket) RC_ASSERT(reaches);
    }
  }
  RC_ASSERT(placed == l.params().size());
}

// docs/distributed.md, "Buffer layout": "The bucket's end is padded to a
// multiple of lcm(dp, 128); the next bucket starts there."
RC_GTEST_PROP(LayoutProp, BucketEndPaddedToLcmOfDpAnd128, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  const int64_t align = std::lcm(static_cast<int64_t>(c.dp), kBucketAlignment);
  int64_t start = 0;
  for (const Bucket& b : l.buckets()) {
    RC_ASSERT(b.world.begin == start);
    RC_ASSERT(b.world.size() % align == 0);
    RC_ASSERT(b.world.size() >= b.numel_unpadded);
    RC_ASSERT(b.world.size() - b.numel_unpadded < align);  // padded up, no further
    start = b.world.end;
  }
  RC_ASSERT(l.numel() == start);
}

// docs/distributed.md, "Buffer layout": "numel_unpadded of a bucket = last
// param end − bucket start: it includes the 64-element gaps and excludes the
// end padding."
RC_GTEST_PROP(LayoutProp, NumelUnpaddedIsLastParamEndMinusBucketStart, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  int64_t sum = 0;
  for (const Bucket& b : l.buckets()) {
    const PlacedParam& last = l.params()[static_cast<size_t>(b.params.back())];
    RC_ASSERT(b.numel_unpadded == last.world.end - b.world.begin);
    sum += b.numel_unpadded;
  }
  RC_ASSERT(l.NumelUnpadded() == sum);
}

// docs/distributed.md, "Buffer layout": "Rank r owns [r·N/dp, (r+1)·N/dp)
// of each bucket (N = padded bucket numel)."
RC_GTEST_PROP(LayoutProp, RankROwnsItsDpthOfEachBucket, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  for (const Bucket& b : l.buckets()) {
    const int64_t n = b.world.size();
    RC_ASSERT(n % c.dp == 0);
    RC_ASSERT(b.ShardSize(c.dp) == n / c.dp);
    for (int r = 0; r < c.dp; ++r) {
      const Range shard = l.ShardRange(b.index, r);
      RC_LOG() << "bucket " << b.index << ", rank " << r << ": [" << shard.begin << ", "
               << shard.end << ")\n";
      RC_ASSERT(shard.begin == b.world.begin + r * n / c.dp);
      RC_ASSERT(shard.end == b.world.begin + (r + 1) * n / c.dp);
    }
  }
}

// docs/distributed.md, "Buffer layout": "A param that straddles a shard
// boundary is cut into 1-D slices; each owned slice keeps four ranges:
// gbuf_world (in the buffer), gbuf_world_in_bucket, gbuf_local (in this
// rank's shard of the bucket) and param (offset within the flattened param)."
RC_GTEST_PROP(LayoutProp, EachSliceKeepsFourAgreeingRanges, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  for (int r = 0; r < c.dp; ++r) {
    int64_t previous_end = -1;
    for (const OwnedSlice& s : l.SlicesOf(r)) {
      RC_LOG() << "rank " << r << ", param " << s.param << ": world [" << s.gbuf_world.begin << ", "
               << s.gbuf_world.end << "), param [" << s.param_range.begin << ", "
               << s.param_range.end << ")\n";
      const Bucket& b = l.buckets().at(static_cast<size_t>(s.bucket));
      const Range shard = l.ShardRange(s.bucket, r);
      const PlacedParam* p = l.Find(s.param);
      RC_ASSERT(p != nullptr);
      RC_ASSERT(s.gbuf_world.size() > 0);
      RC_ASSERT(s.gbuf_world.begin >= previous_end);  // buffer order
      previous_end = s.gbuf_world.end;
      RC_ASSERT(shard.begin <= s.gbuf_world.begin && s.gbuf_world.end <= shard.end);
      RC_ASSERT(p->world.begin <= s.gbuf_world.begin && s.gbuf_world.end <= p->world.end);
      // The largest such piece: the param cut at the shard's edges, nowhere else.
      RC_ASSERT(s.gbuf_world.begin == std::max(p->world.begin, shard.begin));
      RC_ASSERT(s.gbuf_world.end == std::min(p->world.end, shard.end));
      const int64_t size = s.gbuf_world.size();
      RC_ASSERT(s.gbuf_world_in_bucket ==
                (Range{s.gbuf_world.begin - b.world.begin, s.gbuf_world.end - b.world.begin}));
      RC_ASSERT(s.gbuf_local ==
                (Range{s.gbuf_world.begin - shard.begin, s.gbuf_world.begin - shard.begin + size}));
      RC_ASSERT(s.param_range == (Range{s.gbuf_world.begin - p->world.begin,
                                        s.gbuf_world.begin - p->world.begin + size}));
      RC_ASSERT(s.gbuf_local.end <= b.ShardSize(c.dp));
    }
  }
}

// docs/distributed.md, "Buffer layout": "Padding elements are zero and stay
// zero: no slice covers them" — and, as "Worked example" states it, every
// real element is owned by exactly one rank, padding by none.
RC_GTEST_PROP(LayoutProp, EveryRealElementOwnedOnceAndPaddingByNone, ()) {
  const LayoutCase c = *GenLayoutCase();
  const BufferLayout l = c.Build();
  // Per param (model index): the param ranges of every rank's slices.
  std::vector<std::vector<std::pair<Range, int>>> owned(c.numels.size());
  int64_t owned_elements = 0;
  for (int r = 0; r < c.dp; ++r)
    for (const OwnedSlice& s : l.SlicesOf(r)) {
      const PlacedParam* p = l.Find(s.param);
      RC_ASSERT(p != nullptr);
      RC_ASSERT(p->world.begin <= s.gbuf_world.begin && s.gbuf_world.end <= p->world.end);
      owned[static_cast<size_t>(s.param)].push_back({s.param_range, r});
      owned_elements += s.gbuf_world.size();
    }
  for (size_t i = 0; i < owned.size(); ++i) {
    auto& pieces = owned[i];
    std::sort(pieces.begin(), pieces.end(),
              [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
    int64_t covered = 0;
    for (const auto& [range, rank] : pieces) {
      RC_LOG() << "param " << i << ": rank " << rank << " owns [" << range.begin << ", "
               << range.end << ")\n";
      RC_ASSERT(range.begin == covered);  // no element twice, none skipped
      RC_ASSERT(pieces.size() == 1u || range.size() > 0);
      covered = range.end;
    }
    RC_ASSERT(covered == c.numels[i]);
  }
  // Slices lie inside params, so owning exactly the real elements leaves
  // every padding element unowned.
  RC_ASSERT(owned_elements == std::accumulate(c.numels.begin(), c.numels.end(), int64_t{0}));
}

}  // namespace
}  // namespace shardcheck
