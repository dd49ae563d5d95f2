#include "distributed/layout.h"

#include <algorithm>
#include <numeric>

#include "spec/error.h"

namespace shardcheck {

namespace {
int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
}  // namespace

BufferLayout BufferLayout::Build(const std::vector<BufferParamSpec>& params, int dp,
                                 int64_t bucket_size) {
  if (dp < 1) throw Error("layout: dp must be >= 1, got " + std::to_string(dp));
  if (bucket_size < 0) throw Error("layout: bucket_size must be >= 0");
  BufferLayout l;
  l.dp_ = dp;
  l.bucket_size_ = bucket_size;
  const int64_t bucket_align = std::lcm(static_cast<int64_t>(dp), kBucketAlignment);
  int64_t bucket_start = 0, cursor = 0;
  l.params_.reserve(params.size());
  Bucket current;
  auto close_bucket = [&](int64_t last_end) {
    current.index = static_cast<int>(l.buckets_.size());
    current.numel_unpadded = last_end - bucket_start;
    current.world = {bucket_start, bucket_start + RoundUp(last_end - bucket_start, bucket_align)};
    bucket_start = cursor = current.world.end;
    l.buckets_.push_back(std::move(current));
    current = Bucket{};
  };
  // Reverse registration order.
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (it->numel <= 0)
      throw Error("layout: param " + std::to_string(it->param) + " has no elements");
    const int64_t start = RoundUp(cursor, kParamAlignment);
    PlacedParam p{
        it->param, it->numel, {start, start + it->numel}, static_cast<int>(l.buckets_.size())};
    cursor = p.world.end;
    current.params.push_back(static_cast<int>(l.params_.size()));
    l.params_.push_back(p);
    if (bucket_size > 0 && p.world.end - bucket_start >= bucket_size) close_bucket(p.world.end);
  }
  if (!current.params.empty()) close_bucket(cursor);
  l.numel_ = l.buckets_.empty() ? 0 : l.buckets_.back().world.end;
  return l;
}

const PlacedParam* BufferLayout::Find(int param) const {
  for (const auto& p : params_)
    if (p.param == param) return &p;
  return nullptr;
}

Range BufferLayout::ShardRange(int bucket, int rank) const {
  const Bucket& b = buckets_.at(static_cast<size_t>(bucket));
  const int64_t shard = b.ShardSize(dp_);
  return {b.world.begin + rank * shard, b.world.begin + (rank + 1) * shard};
}

std::vector<OwnedSlice> BufferLayout::SlicesOf(int rank) const {
  std::vector<OwnedSlice> out;
  for (const Bucket& b : buckets_) {
    const Range shard = ShardRange(b.index, rank);
    // A bucket's params lie in buffer order: start at the first that ends
    // past the shard's start, stop at the first that starts at its end. So
    // a rank's slices cost O(buckets * log + its slices), not O(params).
    auto first = std::partition_point(b.params.begin(), b.params.end(), [&](int pi) {
      return params_[static_cast<size_t>(pi)].world.end <= shard.begin;
    });
    for (auto it = first; it != b.params.end(); ++it) {
      const PlacedParam& p = params_[static_cast<size_t>(*it)];
      if (p.world.begin >= shard.end) break;
      const int64_t begin = std::max(p.world.begin, shard.begin);
      const int64_t end = std::min(p.world.end, shard.end);
      if (begin >= end) continue;
      OwnedSlice s;
      s.param = p.param;
      s.bucket = b.index;
      s.gbuf_world = {begin, end};
      s.gbuf_world_in_bucket = {begin - b.world.begin, end - b.world.begin};
      s.gbuf_local = {begin - shard.begin, end - shard.begin};
      s.param_range = {begin - p.world.begin, end - p.world.begin};
      out.push_back(s);
    }
  }
  return out;
}

int64_t BufferLayout::NumelUnpadded() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += b.numel_unpadded;
  return n;
}

double NewtonSchulzCost(const std::vector<int64_t>& shape) {
  const double m = static_cast<double>(shape.at(0)), n = static_cast<double>(shape.at(1));
  return std::max(m, n) * std::min(m, n) * std::min(m, n);
}

std::vector<int> AssignLayerWise(const std::vector<std::vector<int64_t>>& shapes, int dp) {
  if (dp < 1) throw Error("layer-wise assignment: dp must be >= 1");
  std::vector<int> order(shapes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return NewtonSchulzCost(shapes[static_cast<size_t>(a)]) >
           NewtonSchulzCost(shapes[static_cast<size_t>(b)]);
  });
  std::vector<double> load(static_cast<size_t>(dp), 0.0);
  std::vector<int> owner(shapes.size(), 0);
  for (int i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[static_cast<size_t>(i)] = r;
    load[static_cast<size_t>(r)] += NewtonSchulzCost(shapes[static_cast<size_t>(i)]);
  }
  return owner;
}

}  // namespace shardcheck
