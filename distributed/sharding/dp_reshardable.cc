// dp_reshardable (Megatron's default; docs/checkpoint-format.md): every
// rank writes its own shard of every bucket, in buffer space, under one key
// per (bucket, kind); a load at another DP size reads each piece's range of
// the bucket from whichever files hold it. The buckets must match.
#include <algorithm>

#include "distributed/checkpoint_format.h"
#include "distributed/sharding_format.h"
#include "spec/failpoint.h"

namespace shardcheck {
namespace {

std::string Key(c10::ScalarType model_dtype, int bucket, const std::string& kind) {
  return DpReshardableKey(0, model_dtype, at::kFloat, bucket, kind);
}

// Elements [begin, begin + n) of bucket b that `rank` writes: its shard,
// less the bucket-end padding (never written); n <= 0 when none.
void ShardExtent(const Bucket& b, int rank, int dp, int64_t& begin, int64_t& n) {
  const int64_t shard = b.ShardSize(dp);
  begin = rank * shard;
  n = std::min(shard, b.numel_unpadded - begin);
}

class DpReshardable : public ShardingFormat {
 public:
  ShardingType type() const override { return ShardingType::kDpReshardable; }
  bool StoresBufferSpace() const override { return true; }

  void AddChunks(const SaveView& v, std::vector<PendingChunk>& out) const override {
    const int rank = v.opt.comm().rank(), dp = v.opt.comm().size();
    for (const Bucket& b : v.opt.layout().buckets()) {
      int64_t begin = 0, n = 0;
      ShardExtent(b, rank, dp, begin, n);
      if (n <= 0) continue;
      for (const PieceKind& kind : v.kinds)
        out.push_back({Key(v.opt.model_dtype(), b.index, kind.name),
                       {b.numel_unpadded},
                       begin,
                       v.ShardParts(b, kind, n)});
    }
  }

  void PlanChunks(const ShardPlace& s, const std::vector<std::string>& kinds,
                  std::vector<ChunkPlan>& out) const override {
    for (const Bucket& b : s.layout.buckets()) {
      int64_t begin = 0, n = 0;
      ShardExtent(b, s.rank, s.dp, begin, n);
      if (n <= 0) continue;
      for (const std::string& kind : kinds)
        out.push_back({Key(s.model_dtype, b.index, kind), {b.numel_unpadded}, begin, n});
    }
  }

  void AddKeys(const DistributedOptimizer& opt, const std::vector<PieceKind>& kinds,
               std::set<std::string>& keys) const override {
    for (const Bucket& b : opt.layout().buckets())
      for (const PieceKind& kind : kinds) keys.insert(Key(opt.model_dtype(), b.index, kind.name));
  }

  TensorRange Locate(const LoadView& v, const OwnedPiece& p, const std::string& kind) const override {
    const int dp = v.place.dp, rank = v.place.rank;
    int read_rank = rank;
    if (v.saved.dp_size != dp && FailpointOn("reshard_rank_order_reversed"))
      read_rank = dp - 1 - rank;
    return {Key(v.place.model_dtype, p.bucket, kind), InBucketBegin(v.place, p, read_rank)};
  }

  TensorRange LocateParam(const ParamPlace& place, const std::string& kind) const override {
    return {Key(place.saved.model_dtype, place.bucket, kind), place.offset};
  }
};

}  // namespace

SHARDCHECK_REGISTER_SHARDING(dp_reshardable) {
  RegisterShardingFormat(std::make_unique<DpReshardable>());
}

}  // namespace shardcheck
