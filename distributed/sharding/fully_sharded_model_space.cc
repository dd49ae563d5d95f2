// fully_sharded_model_space (docs/checkpoint-format.md): every rank writes
// its own pieces of the params, in model space, as chunks of the whole
// params' tensors (the main param as "fp32_param"). A load at any DP size
// and bucket size reads its pieces' ranges of the whole params.
#include "distributed/checkpoint_format.h"
#include "distributed/sharding_format.h"

namespace shardcheck {
namespace {

// The model-space key of `kind`; the main param ("param") is "fp32_param".
std::string Key(const std::string& kind, const std::string& name) {
  return ModelSpaceKey(kind == "param" ? "fp32_param" : kind, name);
}

class FullyShardedModelSpace : public ShardingFormat {
 public:
  ShardingType type() const override { return ShardingType::kFullyShardedModelSpace; }
  bool StoresBufferSpace() const override { return false; }

  void AddChunks(const SaveView& v, std::vector<PendingChunk>& out) const override {
    for (const OwnedPiece& p : v.owned) {
      if (p.bucket < 0) continue;
      const ParamInfo& info = v.opt.params()[static_cast<size_t>(p.param)];
      for (const PieceKind& kind : v.kinds)
        out.push_back(
            {Key(kind.name, info.name), info.shape, p.param_range.begin, {v.PieceData(p, kind)}});
    }
  }

  void PlanChunks(const ShardPlace& s, const std::vector<std::string>& kinds,
                  std::vector<ChunkPlan>& out) const override {
    for (const OwnedPiece& p : BufferPiecesOf(s.layout, s.rank)) {
      const ParamInfo& info = s.params[static_cast<size_t>(p.param)];
      for (const std::string& kind : kinds)
        out.push_back({Key(kind, info.name), info.shape, p.param_range.begin, p.param_range.size()});
    }
  }

  void AddKeys(const DistributedOptimizer& opt, const std::vector<PieceKind>& kinds,
               std::set<std::string>& keys) const override {
    for (const PlacedParam& p : opt.layout().params())
      for (const PieceKind& kind : kinds)
        keys.insert(Key(kind.name, opt.params()[static_cast<size_t>(p.param)].name));
  }

  TensorRange Locate(const LoadView& v, const OwnedPiece& p, const std::string& kind) const override {
    return {Key(kind, v.place.params[static_cast<size_t>(p.param)].name), p.param_range.begin};
  }

  TensorRange LocateParam(const ParamPlace& place, const std::string& kind) const override {
    // A main param saved as "param" (fully_reshardable's name) is read too.
    return {Key(kind, place.name), 0, true, kind == "param" ? ModelSpaceKey("param", place.name) : ""};
  }
};

}  // namespace

SHARDCHECK_REGISTER_SHARDING(fully_sharded_model_space) {
  RegisterShardingFormat(std::make_unique<FullyShardedModelSpace>());
}

}  // namespace shardcheck
