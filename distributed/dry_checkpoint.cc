#include "distributed/dry_checkpoint.h"

#include <chrono>

#include "distributed/checkpoint_index.h"
#include "distributed/distrib_optimizer.h"
#include "distributed/safetensors.h"
#include "distributed/sharding_format.h"
#include "spec/config_json.h"
#include "spec/error.h"
#include "spec/routing.h"

namespace shardcheck {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The checksums a dry save records: zeros, 16 hex digits like a real one.
const std::string kNoChecksum(16, '0');

std::vector<BufferParamSpec> BufferSpecs(const std::vector<ParamInfo>& params) {
  std::vector<BufferParamSpec> specs;
  specs.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    specs.push_back({static_cast<int>(i), params[i].Numel()});
  return specs;
}

// What metadata.json holds besides the tensors and files (CommonMetadata of
// a save, for an elementwise setup with every param in the buffer).
CheckpointMetadata CommonDryMetadata(const DryModel& model, const BufferLayout& layout,
                                     ShardingType type, int dp) {
  CheckpointMetadata m;
  m.sharding_type = type;
  m.optimizer = model.setup.name;
  m.optimizer_config = SetupJson(model.setup);
  const std::vector<ChildOptimizer> children = RouteParams(model.setup, model.params);
  for (const ChildOptimizer& c : children) m.schemas[c.config.kind()] = c.schema.Names();
  m.lr_schedule = model.setup.lr_schedule;
  m.max_lr = model.setup.lr_schedule.Peak(model.setup.main.lr());
  m.groups = GroupRecords(children, model.params);
  m.dp_size = dp;
  m.model_dtype = model.model_dtype;
  m.params = model.params;
  m.param_child.assign(model.params.size(), children[0].config.kind());
  m.buffers.push_back(LayoutRecord(layout, model.params, model.model_dtype));
  return m;
}

// Rank `rank`'s chunks: the format's plan, then (rank 0, buffer-space
// types) the two bucket-size tensors, as BuildChunks orders them.
std::vector<ChunkPlan> RankChunks(const ShardingFormat& format, const ShardPlace& place,
                                  const std::vector<std::string>& kinds) {
  std::vector<ChunkPlan> out;
  format.PlanChunks(place, kinds, out);
  const int64_t nb = static_cast<int64_t>(place.layout.buckets().size());
  if (format.StoresBufferSpace() && place.rank == 0 && nb > 0)
    for (const std::string& key : BucketSizeKeys(place.model_dtype)) out.push_back({key, {nb}, 0, nb});
  return out;
}

// The dtype a chunk is stored in: fp32 for the buffer's tensors, int64 for
// the bucket sizes.
c10::ScalarType ChunkDtype(const ChunkPlan& c, c10::ScalarType model_dtype) {
  const std::vector<std::string> sizes = BucketSizeKeys(model_dtype);
  return (c.key == sizes[0] || c.key == sizes[1]) ? at::kLong : at::kFloat;
}

// RankFileText's text for `chunks` as WriteRankFile would describe the file
// (""  when the rank writes nothing); sets its header bytes.
std::string RankRecord(int rank, const std::vector<ChunkPlan>& chunks, c10::ScalarType model_dtype,
                       uint64_t& header_bytes) {
  header_bytes = 0;
  if (chunks.empty()) return "";
  const std::string file = RankFileName(rank);
  std::vector<SafetensorsSpec> specs;
  specs.reserve(chunks.size());
  for (const ChunkPlan& c : chunks) specs.push_back({c.key, ChunkDtype(c, model_dtype), {c.numel}});
  const SafetensorsLayout layout = LayOutSafetensors(file, specs, RankFileTags(rank));
  header_bytes = layout.DataOffset();
  std::vector<WrittenChunk> written;
  written.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i)
    written.push_back(
        {chunks[i].key, specs[i].dtype, chunks[i].shape, chunks[i].offset, chunks[i].numel, kNoChecksum});
  const FileRecord record{layout.FileBytes(), header_bytes, kNoChecksum};
  return RankFileText(file, record, layout.DataOffset(), layout.entries, written);
}

}  // namespace

std::vector<std::string> DryModel::StateNames() const {
  if (setup.IsComposite())
    throw Error("the dry mode plans the buffer's params only: setup " + setup.name +
                " has a whole-param child; choose an elementwise optimizer");
  const std::vector<ChildOptimizer> children = RouteParams(setup, params);
  return children[0].schema.Names();
}

DrySave PlanDrySave(const DryModel& model, ShardingType type, int dp) {
  std::vector<std::string> kinds = {"param"};
  for (const std::string& s : model.StateNames()) kinds.push_back(s);
  const ShardingFormat& format = FormatOf(type);
  DrySave out;

  Clock::time_point t0 = Clock::now();
  const BufferLayout layout = BufferLayout::Build(BufferSpecs(model.params), dp, model.bucket_size);
  out.layout_seconds = SecondsSince(t0);

  t0 = Clock::now();
  std::vector<std::string> records(static_cast<size_t>(dp));
  out.record_bytes.assign(static_cast<size_t>(dp), 0);
  out.header_bytes.assign(static_cast<size_t>(dp), 0);
  for (int rank = 0; rank < dp; ++rank) {
    const ShardPlace place{layout, model.params, model.model_dtype, rank, dp};
    const size_t r = static_cast<size_t>(rank);
    records[r] = RankRecord(rank, RankChunks(format, place, kinds), model.model_dtype,
                            out.header_bytes[r]);
    out.record_bytes[r] = records[r].size();
    if (!records[r].empty()) ++out.files;
  }
  out.plan_seconds = SecondsSince(t0);

  t0 = Clock::now();
  out.metadata = CommonDryMetadata(model, layout, type, dp);
  AddRankFiles(out.metadata, records);
  out.metadata_bytes = MetadataFileText(out.metadata).size();
  out.metadata_seconds = SecondsSince(t0);
  ++out.files;  // metadata.json
  for (const TensorRecord& t : out.metadata.tensors) out.chunks += static_cast<int64_t>(t.chunks.size());
  return out;
}

namespace {

// Where each (piece, kind) of `rank`'s shard lies in the checkpoint, in
// the order a load lists them (ReadOwnedPieces, checkpoint_load.cc).
std::vector<TensorRange> RankRanges(const ShardingFormat& format, const LoadView& view,
                                    const std::vector<OwnedPiece>& pieces,
                                    const std::vector<std::string>& kinds) {
  std::vector<TensorRange> where;
  where.reserve(pieces.size() * kinds.size());
  for (const OwnedPiece& p : pieces)
    for (const std::string& kind : kinds) where.push_back(format.Locate(view, p, kind));
  return where;
}

}  // namespace

DryLoad PlanDryLoad(const DryModel& model, const CheckpointMetadata& saved, int dp) {
  std::vector<std::string> kinds = {"param"};
  for (const std::string& s : model.StateNames()) kinds.push_back(s);
  const ShardingFormat& format = FormatOf(saved.sharding_type);
  const BufferLayout layout = BufferLayout::Build(BufferSpecs(model.params), dp, model.bucket_size);
  const std::vector<int64_t> prefix = BucketPrefix(layout);
  DryLoad out;
  const Clock::time_point t0 = Clock::now();
  size_t hint = 0;                 // as CheckpointReader::ReadRange keeps it
  for (int rank = 0; rank < dp; ++rank) {
    const Clock::time_point r0 = Clock::now();
    const ShardPlace place{layout, model.params, model.model_dtype, rank, dp};
    const LoadView view{place, saved, prefix};
    const std::vector<OwnedPiece> pieces = BufferPiecesOf(layout, rank);
    std::vector<TensorRange> where = RankRanges(format, view, pieces, kinds);
    const std::vector<const TensorRecord*> records = FindRanges(saved.tensors, where);
    for (size_t i = 0; i < where.size(); ++i) {
      if (!records[i]) throw Error("dry load: no tensor " + where[i].key);
      const int64_t n = pieces[i / kinds.size()].param_range.size();
      const ChunkSpan span = ChunksCovering(*records[i], where[i].begin, n, &hint);
      int64_t covered = 0;
      for (size_t c = span.first; c < span.last; ++c) {
        const ChunkRecord& chunk = records[i]->chunks[c];
        covered += std::min(where[i].begin + n, chunk.offset + chunk.numel) -
                   std::max(where[i].begin, chunk.offset);
      }
      if (covered != n)
        throw Error("dry load: " + where[i].key + " covers " + std::to_string(covered) + " of [" +
                    std::to_string(where[i].begin) + ", " + std::to_string(where[i].begin + n) + ")");
      ++out.pieces;
      out.chunk_reads += static_cast<int64_t>(span.Size());
    }
    out.max_rank_seconds = std::max(out.max_rank_seconds, SecondsSince(r0));
  }
  out.seconds = SecondsSince(t0);
  return out;
}

}  // namespace shardcheck
