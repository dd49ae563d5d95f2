// One sharding type's part of a checkpoint (docs/checkpoint-format.md,
// "Sharding types" and "Adding a sharding type"). The checkpoint engine
// (distributed/checkpoint*.cc) does everything the types share: the
// layer-wise params (whole, in model space, by their owner), the commit
// protocol, metadata.json, compatibility checks and the reader. A format
// decides three things for the params of the buffer (the sharded child):
//
//   what a rank writes      AddChunks (collective for the gathered types),
//                           PlanChunks (the same without data)
//   what the metadata holds AddKeys, StoresBufferSpace
//   where a load finds its  Locate (this run's DP size, any saved one),
//   bytes                   LocateParam (from the metadata alone)
//
// PlanChunks and Locate need no tensors: they see a ShardPlace, the layout
// and a rank, so the dry mode (distributed/dry_checkpoint.h) plans saves
// and loads at any DP size without data.
//
// Each format lives in one file of distributed/sharding/ and registers
// itself with one SHARDCHECK_REGISTER_SHARDING(<name>) line: the build
// generates the list (cmake/registry.cmake), so adding a type touches that
// file and its tests only.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "distributed/distrib_optimizer.h"
#include "distributed/layout.h"
#include "distributed/sharding_type.h"
#include "distributed/tensor_table.h"

namespace shardcheck {

struct CheckpointMetadata;

// A rank's place in the buffer, without data: the layout, the params and
// the rank. A DistributedOptimizer's (PlaceOf), or one the dry mode builds.
struct ShardPlace {
  const BufferLayout& layout;
  const std::vector<ParamInfo>& params;
  c10::ScalarType model_dtype = c10::kFloat;
  int rank = 0;
  int dp = 1;
};
ShardPlace PlaceOf(const DistributedOptimizer& opt);

// One tensor of a buffer piece as a checkpoint names it: the fp32 main
// param, named "param", or one of its child's states, named by its key.
struct PieceKind {
  std::string name;
  int state = -1;  // -1: the main param; else the index into OwnedPiece::state

  bool IsMain() const { return state < 0; }
  // The piece's tensor of this kind.
  const at::Tensor& Of(const OwnedPiece& p) const {
    return IsMain() ? p.main : p.state[static_cast<size_t>(state)];
  }
};

// "param", then each of `state_names` with its index.
std::vector<PieceKind> PieceKinds(const std::vector<std::string>& state_names);

// A contiguous run of one checkpoint tensor that this rank writes.
struct PendingChunk {
  std::string key;
  std::vector<int64_t> shape;  // global shape
  int64_t offset = 0;          // first element in the flattened global tensor
  // The chunk's data: the concatenation of these (CPU, contiguous, one
  // dtype), written from their own memory: views of the optimizer's
  // storage, with zero tensors for the padding gaps of a shard.
  std::vector<at::Tensor> parts;

  int64_t Numel() const;
};

// A chunk a rank writes, without its data: elements [offset, offset +
// numel) of the flattened tensor `key` of global shape `shape`, stored 1-D.
struct ChunkPlan {
  std::string key;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
};

// The buffer's data as a save sees it on this rank.
struct SaveView {
  DistributedOptimizer& opt;
  // The main param and the states a save writes.
  const std::vector<PieceKind>& kinds;
  // This rank's pieces; those of the buffer have bucket >= 0.
  const std::vector<OwnedPiece>& owned;

  // Piece p's tensor of `kind` as a save writes it, readable on the host.
  at::Tensor PieceData(const OwnedPiece& p, const PieceKind& kind) const;
  // The first n elements of this rank's shard of b for `kind`, as parts
  // without a copy (the owned pieces in shard order, zero gaps between).
  std::vector<at::Tensor> ShardParts(const Bucket& b, const PieceKind& kind, int64_t n) const;
  // This rank's whole shard of b for `kind` (gaps and padding zero), a copy.
  at::Tensor Shard(const Bucket& b, const PieceKind& kind) const;
};

// Where a load reads: elements [begin, begin + numel) of `key`, or (whole)
// the whole tensor in its global shape. A format whose checkpoints name a
// tensor one of two ways sets `or_key`: where the checkpoint lacks `key`,
// the same range lies under `or_key`.
struct TensorRange {
  std::string key;
  int64_t begin = 0;
  bool whole = false;
  std::string or_key = {};  // empty: no other name
};

// The record of each of `ranges`, in order, looked up as one batch
// (TensorTable::FindAll); a range whose key the table lacks moves to its
// or_key when the table has that. nullptr where neither is there.
std::vector<const TensorRecord*> FindRanges(const TensorTable& tensors,
                                            std::vector<TensorRange>& ranges);

// A buffer piece as a load at this run's DP size sees it.
struct LoadView {
  const ShardPlace& place;
  const CheckpointMetadata& saved;
  // Sum of numel_unpadded of the buckets before each bucket (this layout's,
  // equal to the checkpoint's for the types that store buffer space).
  const std::vector<int64_t>& bucket_prefix;
};

// Where a buffer param lies in a checkpoint's metadata (ReadModelSpace).
struct ParamPlace {
  const CheckpointMetadata& saved;
  const std::string& name;
  int bucket = 0;
  int64_t offset = 0;         // in its bucket
  int64_t bucket_prefix = 0;  // sum of numel_unpadded of the buckets before
};

class ShardingFormat {
 public:
  virtual ~ShardingFormat() = default;
  virtual ShardingType type() const = 0;
  // Whether the checkpoint stores buffer space: then rank 0 also writes the
  // bucket-size tensors, and a load requires the same buckets and places
  // (only the DP size may change).
  virtual bool StoresBufferSpace() const = 0;
  // Appends what this rank writes of the buffer params. Every rank calls it
  // (the gathered types gather here).
  virtual void AddChunks(const SaveView& v, std::vector<PendingChunk>& out) const = 0;
  // Appends what rank s.rank writes of the buffer params with the tensors
  // `kinds` ("param", then state keys), in the order AddChunks appends
  // them, without data and without gathering. A save writes exactly these
  // (distributed/dry_save_test.cc compares them).
  virtual void PlanChunks(const ShardPlace& s, const std::vector<std::string>& kinds,
                          std::vector<ChunkPlan>& out) const = 0;
  // Adds the keys of the buffer params' tensors a save of `opt` writes;
  // `kinds` as in SaveView.
  virtual void AddKeys(const DistributedOptimizer& opt, const std::vector<PieceKind>& kinds,
                       std::set<std::string>& keys) const = 0;
  // Where `kind` ("param" for the main param) of this rank's buffer piece
  // p lies in a checkpoint of this type saved at any DP size.
  virtual TensorRange Locate(const LoadView& v, const OwnedPiece& p,
                             const std::string& kind) const = 0;
  // Where `kind` of a whole buffer param starts, from the metadata alone.
  virtual TensorRange LocateParam(const ParamPlace& place, const std::string& kind) const = 0;
};

// The format of `type`; throws Error for an unregistered one.
const ShardingFormat& FormatOf(ShardingType type);

// Adds a format (the registration functions call it). Throws Error on a
// name already registered.
void RegisterShardingFormat(std::unique_ptr<ShardingFormat> format);

// Defines the registration function of one format file:
//   SHARDCHECK_REGISTER_SHARDING(dp_reshardable) {
//     RegisterShardingFormat(std::make_unique<DpReshardable>());
//   }
// The line must start the line: cmake/registry.cmake finds it there.
#define SHARDCHECK_REGISTER_SHARDING(name) void RegisterShardingOf_##name()

// Helpers the formats share.

// Sum of numel_unpadded of the buckets before each bucket (LoadView's
// bucket_prefix).
std::vector<int64_t> BucketPrefix(const BufferLayout& layout);

// Where piece p starts in its bucket's space as a load reads it:
// p.in_bucket.begin, moved by (read_rank - this rank) shards when the
// caller reads another rank's place (silent bugs), and elsewhere under the
// silent bug ignore_param_start_padding; kept inside the bucket's unpadded
// range, so the read itself succeeds.
int64_t InBucketBegin(const ShardPlace& s, const OwnedPiece& p, int read_rank);

// The 1-D tensors `pieces` (a bucket's gathered shards) as one run, without
// concatenating them: Slice returns elements [begin, begin + numel) of the
// run as views of the pieces that hold them, in order (one empty view for
// numel 0), so a gathered type writes its chunks from the received shards
// with no copy. Slice costs O(log pieces + pieces spanned). Throws Error
// when the range leaves the run.
class ConcatenatedPieces {
 public:
  explicit ConcatenatedPieces(std::vector<at::Tensor> pieces);
  std::vector<at::Tensor> Slice(int64_t begin, int64_t numel) const;
  int64_t Numel() const { return starts_.back(); }

 private:
  std::vector<at::Tensor> pieces_;
  std::vector<int64_t> starts_;  // pieces_.size() + 1 prefix sums
};

}  // namespace shardcheck
