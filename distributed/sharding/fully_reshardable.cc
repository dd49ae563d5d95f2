// fully_reshardable (docs/checkpoint-format.md): every bucket's shards are
// gathered to rank 0, which writes every param whole in model space, the
// main param as "param". A load at any DP size and bucket size reads its
// pieces' ranges of the whole params.
#include "distributed/checkpoint_format.h"
#include "distributed/sharding_format.h"

namespace shardcheck {
namespace {

class FullyReshardable : public ShardingFormat {
 public:
  ShardingType type() const override { return ShardingType::kFullyReshardable; }
  bool StoresBufferSpace() const override { return false; }

  void AddChunks(const SaveView& v, std::vector<PendingChunk>& out) const override {
    const BufferLayout& layout = v.opt.layout();
    // One gather per (kind, bucket) of every rank's shard.
    for (const PieceKind& kind : v.kinds) {
      for (const Bucket& b : layout.buckets()) {
        std::vector<at::Tensor> shards = v.opt.comm().Gather(v.Shard(b, kind), 0);
        if (v.opt.comm().rank() != 0) continue;
        const ConcatenatedPieces bucket(std::move(shards));  // written from the shards
        for (int pi : b.params) {
          const PlacedParam& p = layout.params()[static_cast<size_t>(pi)];
          const ParamInfo& info = v.opt.params()[static_cast<size_t>(p.param)];
          out.push_back({ModelSpaceKey(kind.name, info.name), info.shape, 0,
                         bucket.Slice(p.world.begin - b.world.begin, p.numel)});
        }
      }
    }
  }

  void PlanChunks(const ShardPlace& s, const std::vector<std::string>& kinds,
                  std::vector<ChunkPlan>& out) const override {
    if (s.rank != 0) return;
    for (const std::string& kind : kinds)
      for (const Bucket& b : s.layout.buckets())
        for (int pi : b.params) {
          const PlacedParam& p = s.layout.params()[static_cast<size_t>(pi)];
          const ParamInfo& info = s.params[static_cast<size_t>(p.param)];
          out.push_back({ModelSpaceKey(kind, info.name), info.shape, 0, p.numel});
        }
  }

  void AddKeys(const DistributedOptimizer& opt, const std::vector<PieceKind>& kinds,
               std::set<std::string>& keys) const override {
    for (const PlacedParam& p : opt.layout().params())
      for (const PieceKind& kind : kinds)
        keys.insert(ModelSpaceKey(kind.name, opt.params()[static_cast<size_t>(p.param)].name));
  }

  TensorRange Locate(const LoadView& v, const OwnedPiece& p, const std::string& kind) const override {
    const std::string& name = v.place.params[static_cast<size_t>(p.param)].name;
    return {ModelSpaceKey(kind, name), p.param_range.begin, false,
            kind == "param" ? FullyShardedMainKey(name) : ""};
  }

  TensorRange LocateParam(const ParamPlace& place, const std::string& kind) const override {
    return {ModelSpaceKey(kind, place.name), 0, true,
            kind == "param" ? FullyShardedMainKey(place.name) : ""};
  }

 private:
  // The main param is "param", or "fp32_param" as fully_sharded_model_space
  // names it: a checkpoint may carry either, and a load takes the other
  // when "param" is absent.
  static std::string FullyShardedMainKey(const std::string& name) {
    return ModelSpaceKey("fp32_param", name);
  }
};

}  // namespace

SHARDCHECK_REGISTER_SHARDING(fully_reshardable) {
  RegisterShardingFormat(std::make_unique<FullyReshardable>());
}

}  // namespace shardcheck
