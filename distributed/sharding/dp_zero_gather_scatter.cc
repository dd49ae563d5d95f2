// dp_zero_gather_scatter (Megatron's legacy format; docs/checkpoint-format.md):
// every bucket's shards are gathered to rank 0, which writes one tensor per
// kind: the buckets' unpadded spaces, concatenated. A load reads each
// piece's range at its bucket's prefix. The buckets must match.
#include "distributed/checkpoint_format.h"
#include "distributed/sharding_format.h"
#include "spec/failpoint.h"

namespace shardcheck {
namespace {

std::string Key(c10::ScalarType model_dtype, const std::string& kind) {
  return DpZeroKey(0, model_dtype, at::kFloat, kind);
}

class DpZeroGatherScatter : public ShardingFormat {
 public:
  ShardingType type() const override { return ShardingType::kDpZeroGatherScatter; }
  bool StoresBufferSpace() const override { return true; }

  void AddChunks(const SaveView& v, std::vector<PendingChunk>& out) const override {
    const bool root = v.opt.comm().rank() == 0;
    // The silent bug bucket_offsets_use_padded_sizes keeps each bucket's end padding.
    const bool padded = FailpointOn("bucket_offsets_use_padded_sizes");
    for (const PieceKind& kind : v.kinds) {
      std::vector<at::Tensor> parts;
      for (const Bucket& b : v.opt.layout().buckets()) {
        std::vector<at::Tensor> shards = v.opt.comm().Gather(v.Shard(b, kind), 0);
        if (!root) continue;
        // Written from the received shards, no concatenation.
        const ConcatenatedPieces bucket(std::move(shards));
        for (at::Tensor& part : bucket.Slice(0, padded ? bucket.Numel() : b.numel_unpadded))
          parts.push_back(std::move(part));
      }
      if (!root || parts.empty()) continue;
      int64_t numel = 0;
      for (const at::Tensor& part : parts) numel += part.numel();
      out.push_back({Key(v.opt.model_dtype(), kind.name), {numel}, 0, std::move(parts)});
    }
  }

  void PlanChunks(const ShardPlace& s, const std::vector<std::string>& kinds,
                  std::vector<ChunkPlan>& out) const override {
    if (s.rank != 0 || s.layout.buckets().empty()) return;
    const int64_t all = s.layout.NumelUnpadded();
    for (const std::string& kind : kinds) out.push_back({Key(s.model_dtype, kind), {all}, 0, all});
  }

  void AddKeys(const DistributedOptimizer& opt, const std::vector<PieceKind>& kinds,
               std::set<std::string>& keys) const override {
    if (opt.layout().buckets().empty()) return;
    for (const PieceKind& kind : kinds) keys.insert(Key(opt.model_dtype(), kind.name));
  }

  TensorRange Locate(const LoadView& v, const OwnedPiece& p, const std::string& kind) const override {
    const int dp = v.place.dp, rank = v.place.rank;
    int read_rank = rank;
    if (FailpointOn("wrong_dp_rank_in_dp_zero_scatter")) read_rank = (rank + 1) % dp;
    return {Key(v.place.model_dtype, kind),
            v.bucket_prefix[static_cast<size_t>(p.bucket)] + InBucketBegin(v.place, p, read_rank)};
  }

  TensorRange LocateParam(const ParamPlace& place, const std::string& kind) const override {
    return {Key(place.saved.model_dtype, kind), place.bucket_prefix + place.offset};
  }
};

}  // namespace

SHARDCHECK_REGISTER_SHARDING(dp_zero_gather_scatter) {
  RegisterShardingFormat(std::make_unique<DpZeroGatherScatter>());
}

}  // namespace shardcheck
