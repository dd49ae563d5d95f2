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

std::string Key(const DistributedOptimizer& opt, int bucket, const std::string& kind) {
  return DpReshardableKey(0, opt.model_dtype(), at::kFloat, bucket, kind);
}

class DpReshardable : public ShardingFormat {
 public:
  ShardingType type() const override { return ShardingType::kDpReshardable; }
  bool StoresBufferSpace() const override { return true; }

  void AddChunks(const SaveView& v, std::vector<PendingChunk>& out) const override {
    const int rank = v.opt.comm().rank(), dp = v.opt.comm().size();
    for (const Bucket& b : v.opt.layout().buckets()) {
      const int64_t shard = b.ShardSize(dp), begin = rank * shard;
      const int64_t n = std::min(shard, b.numel_unpadded - begin);
      if (n <= 0) continue;  // bucket-end padding is never written
      for (const PieceKind& kind : v.kinds)
        out.push_back(
            {Key(v.opt, b.index, kind.name), {b.numel_unpadded}, begin, v.ShardParts(b, kind, n)});
    }
  }

  void AddKeys(const DistributedOptimizer& opt, const std::vector<PieceKind>& kinds,
               std::set<std::string>& keys) const override {
    for (const Bucket& b : opt.layout().buckets())
      for (const PieceKind& kind : kinds) keys.insert(Key(opt, b.index, kind.name));
  }

  TensorRange Locate(const LoadView& v, const OwnedPiece& p, const std::string& kind) const override {
    const int dp = v.opt.comm().size(), rank = v.opt.comm().rank();
    int read_rank = rank;
    if (v.reader.metadata().dp_size != dp && FailpointOn("reshard_rank_order_reversed"))
      read_rank = dp - 1 - rank;
    return {Key(v.opt, p.bucket, kind), InBucketBegin(v.opt, p, read_rank)};
  }

  TensorRange LocateParam(const ParamPlace& place, const std::string& kind) const override {
    const CheckpointMetadata& m = place.reader.metadata();
    return {DpReshardableKey(0, m.model_dtype, at::kFloat, place.bucket, kind), place.offset};
  }
};

}  // namespace

SHARDCHECK_REGISTER_SHARDING(dp_reshardable) {
  RegisterShardingFormat(std::make_unique<DpReshardable>());
}

}  // namespace shardcheck
