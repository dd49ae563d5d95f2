// Megatron-LM's DistributedOptimizer buffer layout (docs/distributed.md).
//
// Params of one buffer are laid out in REVERSE registration order, each
// start padded up to a multiple of 64 elements. A bucket closes after the
// param whose end makes (end - bucket_start) >= bucket_size (bucket_size 0:
// one bucket); its end is padded to a multiple of lcm(dp, 128) and the next
// bucket starts there. Rank r owns [r*N/dp, (r+1)*N/dp) of every bucket of
// padded size N; a param that straddles a shard boundary is cut into 1-D
// slices, each described by four ranges.
#pragma once

#include <cstdint>
#include <vector>

namespace shardcheck {

inline constexpr int64_t kParamAlignment = 64;
inline constexpr int64_t kBucketAlignment = 128;

// [begin, end) in elements.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};

// One param placed in a buffer.
struct PlacedParam {
  int param = 0;      // index in the model's registration order (the oracle pid)
  int64_t numel = 0;
  Range world;        // where it lies in the buffer
  int bucket = 0;
};

struct Bucket {
  int index = 0;
  Range world;                  // padded: world.size() is a multiple of lcm(dp, 128)
  int64_t numel_unpadded = 0;   // last param end - bucket start (gaps included, end padding not)
  std::vector<int> params;      // indices into BufferLayout::params, in buffer order
  int64_t ShardSize(int dp) const { return world.size() / dp; }
};

// A piece of one param that one rank owns (Megatron's four ranges).
struct OwnedSlice {
  int param = 0;                // model index
  int bucket = 0;
  Range gbuf_world;             // in the whole buffer
  Range gbuf_world_in_bucket;   // relative to the bucket start
  Range gbuf_local;             // relative to this rank's shard start in the bucket
  Range param_range;            // offset within the flattened param
};

struct BufferParamSpec {
  int param = 0;       // model index
  int64_t numel = 0;
};

class BufferLayout {
 public:
  // `params` in registration order; `bucket_size` 0 means one bucket.
  // Throws Error on dp < 1, a negative bucket size or an empty param.
  static BufferLayout Build(const std::vector<BufferParamSpec>& params, int dp, int64_t bucket_size);

  int dp() const { return dp_; }
  int64_t numel() const { return numel_; }  // padded total
  int64_t bucket_size() const { return bucket_size_; }
  const std::vector<PlacedParam>& params() const { return params_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The placed param of model index `param`, or nullptr.
  const PlacedParam* Find(int param) const;
  // Shard of `rank` in bucket b, in buffer coordinates.
  Range ShardRange(int bucket, int rank) const;
  // Every slice `rank` owns, bucket by bucket, in buffer order.
  std::vector<OwnedSlice> SlicesOf(int rank) const;
  // Sum of numel_unpadded over buckets.
  int64_t NumelUnpadded() const;

 private:
  int dp_ = 1;
  int64_t numel_ = 0;
  int64_t bucket_size_ = 0;
  std::vector<PlacedParam> params_;
  std::vector<Bucket> buckets_;
};

// Layer-wise assignment for Muon: whole params to ranks by longest-
// processing-time-first bin packing on the Newton–Schulz cost
// max(m,n)*min(m,n)^2 (ties: lower model index first; lightest rank, lowest
// rank on ties). Returns the owner rank of each entry of `shapes` (2-D).
std::vector<int> AssignLayerWise(const std::vector<std::vector<int64_t>>& shapes, int dp);
// The cost used above.
double NewtonSchulzCost(const std::vector<int64_t>& shape);

}  // namespace shardcheck
