#include "distributed/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>

#include "distributed/file_util.h"
#include "distributed/gather_strings.h"
#include "distributed/checkpoint_index.h"
#include "distributed/checkpoint_parts.h"
#include "distributed/safetensors.h"
#include "distributed/sharding_format.h"
#include "spec/config_json.h"
#include "spec/device.h"
#include "spec/error.h"
#include "spec/failpoint.h"
#include "spec/schema.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

// Buffer-space types: the buckets' padded and unpadded sizes (rank 0).
void AddBucketSizes(std::vector<PendingChunk>& out, const DistributedOptimizer& opt) {
  const BufferLayout& l = opt.layout();
  if (l.buckets().empty()) return;  // every param is layer-wise: no buffer to describe
  std::vector<int64_t> numel, unpadded;
  for (const Bucket& b : l.buckets()) {
    numel.push_back(b.world.size());
    unpadded.push_back(b.numel_unpadded);
  }
  const int64_t nb = static_cast<int64_t>(numel.size());
  const std::vector<std::string> keys = BucketSizeKeys(opt.model_dtype());
  out.push_back({keys[0], {nb}, 0, {at::tensor(numel, at::kLong)}});
  out.push_back({keys[1], {nb}, 0, {at::tensor(unpadded, at::kLong)}});
}

// Layer-wise (Muon) params, whole, in model space, by their owner.
void AddLayerWiseChunks(const DistributedOptimizer& opt, const std::vector<OwnedPiece>& owned,
                        std::vector<PendingChunk>& out) {
  const bool layer_wise_state = !FailpointOn("layerwise_state_not_saved");
  for (const OwnedPiece& p : owned) {
    if (p.bucket >= 0) continue;
    const ParamInfo& info = opt.params()[static_cast<size_t>(p.param)];
    out.push_back({ModelSpaceKey("fp32_param", info.name), info.shape, 0, {OnHost(p.main)}});
    if (!layer_wise_state) continue;
    const std::vector<std::string> names = StateNames(opt, p.child);
    for (size_t k = 0; k < names.size(); ++k)
      out.push_back(
          {ModelSpaceKey(names[k], info.name), info.shape, 0, {OnHost(SavedState(p.state[k]))}});
  }
}

// What this rank writes for `type`: the layer-wise params, the buffer's
// params as the type's format lays them out, and (rank 0, types that store
// buffer space) the bucket sizes. Collective for the gathered types.
std::vector<PendingChunk> BuildChunks(DistributedOptimizer& opt, ShardingType type) {
  const ShardingFormat& format = FormatOf(type);
  const std::vector<PieceKind> kinds = SavedKinds(opt);
  const std::vector<OwnedPiece> owned = opt.Owned();
  std::vector<PendingChunk> out;
  AddLayerWiseChunks(opt, owned, out);
  format.AddChunks(SaveView{opt, kinds, owned}, out);
  if (format.StoresBufferSpace() && opt.comm().rank() == 0) AddBucketSizes(out, opt);
  return out;
}

CheckpointMetadata CommonMetadata(const DistributedOptimizer& opt, ShardingType type) {
  CheckpointMetadata m;
  m.sharding_type = type;
  m.optimizer = opt.setup().name;
  m.optimizer_config = SetupJson(opt.setup());
  for (const auto& c : opt.children()) m.schemas[c.config.kind()] = c.schema.Names();
  std::vector<std::string>& sharded =
      m.schemas[opt.children()[static_cast<size_t>(opt.sharded_child())].config.kind()];
  if (sharded.size() > 2 && FailpointOn("third_state_key_dropped"))
    sharded.erase(sharded.begin() + 2);
  m.step = FailpointOn("drop_step_on_save") ? 0 : opt.step();
  m.lr_schedule = opt.lr_schedule();
  m.max_lr = opt.schedule_peak_lr();
  m.dp_size = opt.comm().size();
  m.model_dtype = opt.model_dtype();
  m.params = opt.params();
  for (size_t i = 0; i < opt.params().size(); ++i)
    m.param_child.push_back(
        opt.children()[static_cast<size_t>(opt.ChildOf(static_cast<int>(i)))].config.kind());
  m.groups = GroupRecords(opt.children(), opt.params());
  m.buffers.push_back(LayoutRecord(opt.layout(), opt.params(), opt.model_dtype()));
  for (const auto& [param, owner] : opt.layer_wise_owners())
    m.layer_wise_owner[opt.params()[static_cast<size_t>(param)].name] = owner;
  return m;
}

// Rank 0 checks that `target` does not exist and creates the temporary
// folder "<target>.tmp-<id>" beside it; every rank gets its path.
fs::path ClaimTemporary(Communicator& comm, const fs::path& target) {
  at::Tensor decision = at::zeros({2}, at::kLong);
  if (comm.rank() == 0) {
    decision[0] = fs::exists(target) ? 1 : 0;
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    decision[1] = static_cast<int64_t>((static_cast<uint64_t>(::getpid()) << 32) ^
                                       static_cast<uint64_t>(now)) &
                  0x7FFFFFFFFFFFFFFF;
  }
  comm.Broadcast(decision, 0);
  if (decision[0].item<int64_t>() != 0)
    throw Error("refusing to save: " + target.string() +
                " exists (checkpoints are never overwritten)");
  std::ostringstream id;
  id << std::hex << decision[1].item<int64_t>();
  const fs::path tmp = target.string() + ".tmp-" + id.str();
  Agree(comm, "creating " + tmp.string(), [&] {
    if (comm.rank() != 0) return;
    fs::create_directories(target.parent_path());
    if (!fs::create_directory(tmp)) throw Error("cannot create " + tmp.string() + ": it exists");
  });
  return tmp;
}

// Writes this rank's file into `tmp` and returns what metadata.json records
// of it (RankFileText: the file, its FileRecord and its chunk records).
std::string WriteRankFile(const fs::path& tmp, int rank, const std::vector<PendingChunk>& chunks) {
  const std::string file = RankFileName(rank);
  const std::string path = (tmp / file).string();
  std::vector<SafetensorsParts> tensors;
  for (const PendingChunk& c : chunks) {
    // One part keeps its own shape (a layer-wise matrix is written 2-D);
    // parts make a 1-D run.
    const std::vector<int64_t> shape =
        c.parts.size() == 1 ? c.parts[0].sizes().vec() : std::vector<int64_t>{c.Numel()};
    tensors.push_back({c.key, shape, c.parts});
  }
  // Each chunk's checksum is taken in the write's own pass over its bytes.
  std::vector<Xxh3Stream> sums(chunks.size());
  WriteSafetensorsParts(
      path, tensors, RankFileTags(rank), [rank] { Failpoint("save.rank_file_partial", rank); },
      [&sums](size_t chunk, const void* data, size_t size) { sums[chunk].Update(data, size); });
  Failpoint("save.after_rank_file", rank);
  const SafetensorsFile header = ReadSafetensorsHeader(path);
  std::vector<WrittenChunk> written;
  written.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PendingChunk& c = chunks[i];
    written.push_back(
        {c.key, c.parts[0].scalar_type(), c.shape, c.offset, c.Numel(), sums[i].Hex()});
  }
  return RankFileText(file, RecordFile(path), header.DataOffset(), header.entries, written);
}

// Rank 0's commit: metadata.json into `tmp`, the rename to `target` (never
// replacing), the parent's fsync, then `latest`. Sets `renamed` once the
// checkpoint is committed.
void Commit(const CheckpointMetadata& m, const fs::path& tmp, const fs::path& target,
            bool& renamed) {
  Failpoint("save.before_metadata", 0);
  WriteFileAtomic((tmp / kMetadataFile).string(), MetadataFileText(m));
  Failpoint("save.before_rename", 0);
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0)
    throw Error(
        "cannot rename " + tmp.string() + " to " + target.string() + ": " + std::strerror(errno),
        errno == EEXIST ? ErrorKind::kInput : ErrorKind::kEnvironment);
  renamed = true;
  FsyncDir(target.parent_path().string());
  Failpoint("save.before_latest", 0);
  WriteFileAtomic((target.parent_path() / "latest").string(), target.filename().string() + "\n");
}

}  // namespace

void SaveCheckpoint(DistributedOptimizer& opt, const std::string& dir, ShardingType type) {
  Communicator& comm = opt.comm();
  const int rank = comm.rank();
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const fs::path target = fs::absolute(path);
  const fs::path tmp = ClaimTemporary(comm, target);
  bool renamed = false;
  try {
    std::vector<PendingChunk> chunks = BuildChunks(opt, type);
    std::string written;
    Agree(comm, "writing " + tmp.string(), [&] {
      if (!chunks.empty()) written = WriteRankFile(tmp, rank, chunks);
    });
    const std::vector<std::string> all = GatherStrings(comm, written, 0);
    Agree(comm, "committing " + target.string(), [&] {
      if (rank != 0) return;
      CheckpointMetadata m = CommonMetadata(opt, type);
      AddRankFiles(m, all);
      Commit(m, tmp, target, renamed);
    });
  } catch (...) {
    // Nothing half-written stays behind a failed save (a crashed process
    // leaves its .tmp- folder to `shardcheck gc`).
    if (rank == 0 && !renamed) {
      std::error_code ignored;
      fs::remove_all(tmp, ignored);
    }
    throw;
  }
}

}  // namespace shardcheck
