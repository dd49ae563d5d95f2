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
#include "distributed/hyperparam_diff.h"
#include "distributed/safetensors.h"
#include "spec/config_json.h"
#include "spec/device.h"
#include "spec/error.h"
#include "spec/failpoint.h"
#include "spec/schema.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

// A contiguous run of one checkpoint tensor that this rank writes.
struct Pending {
  std::string key;
  std::vector<int64_t> shape;  // global shape
  int64_t offset = 0;          // first element in the flattened global tensor
  // The chunk's data: the concatenation of these (CPU, contiguous, one
  // dtype), written from their own memory: views of the optimizer's
  // storage, with zero tensors for the padding gaps of a shard.
  std::vector<at::Tensor> parts;

  int64_t Numel() const {
    int64_t n = 0;
    for (const at::Tensor& p : parts) n += p.numel();
    return n;
  }
};

// `t` readable on the host without a copy when it already lives there (the
// save writes it before the optimizer changes again), else a host copy.
at::Tensor OnHost(const at::Tensor& t) {
  return t.device().is_cpu() ? t.contiguous() : HostCopy(t);
}

// The names under which saves and loads keep the states of child `child`:
// its schema's keys, in order. Under the silent bugs named here, other
// names, and fewer of them (states past the list are neither saved nor
// loaded).
std::vector<std::string> StateNames(const DistributedOptimizer& opt, int child) {
  const auto& children = opt.children();
  const size_t count = children[static_cast<size_t>(child)].schema.keys.size();
  const bool top_level = FailpointOn("schema_from_top_level_optimizer");
  std::vector<std::string> names =
      children[top_level ? 0 : static_cast<size_t>(child)].schema.Names();
  names.resize(std::min(names.size(), count));
  if (FailpointOn("two_moment_state_keys")) {
    const std::vector<std::string> moments = {"exp_avg", "exp_avg_sq"};
    names.resize(std::min(names.size(), moments.size()));
    std::copy(moments.begin(), moments.begin() + static_cast<int64_t>(names.size()), names.begin());
  }
  return names;
}

// "param" (the fp32 main param) and the state names of the sharded child.
std::vector<std::string> ShardedKinds(const DistributedOptimizer& opt) {
  std::vector<std::string> kinds = {"param"};
  for (const std::string& k : StateNames(opt, opt.sharded_child())) kinds.push_back(k);
  return kinds;
}

// What a save writes of state `data`: itself, or under the silent bug
// state_dtype_bf16_on_save its bf16 rounding, back in fp32.
at::Tensor SavedState(const at::Tensor& data) {
  if (!FailpointOn("state_dtype_bf16_on_save")) return data;
  return data.to(at::kBFloat16).to(at::kFloat);
}

// Model-space key of a sharded param's main param under `type`.
std::string MainKind(ShardingType type) {
  return type == ShardingType::kFullyReshardable ? "param" : "fp32_param";
}

// Runs `fn` on every rank; if it threw on any rank, every rank throws: the
// failing rank its own message, the others one naming the first failing
// rank, all with that rank's error kind (so a full disk on one rank is an
// environment failure everywhere).
void Agree(Communicator& comm, const std::string& what, const std::function<void()>& fn) {
  std::string err;
  ErrorKind kind = ErrorKind::kInput;
  try {
    fn();
  } catch (const Error& e) {
    err = e.what();
    kind = e.kind();
  } catch (const std::exception& e) {
    err = e.what();
    kind = ErrorKind::kEnvironment;
  }
  // The lowest failing rank, as the max of negated ranks (-size: none).
  at::Tensor lowest = at::full({1}, err.empty() ? -comm.size() : -comm.rank(), at::kLong);
  comm.AllReduce(lowest, ReduceOp::kMax);
  const int64_t failing = -lowest.item<int64_t>();
  if (failing >= comm.size()) return;
  at::Tensor failing_kind = at::full({1}, static_cast<int64_t>(kind), at::kLong);
  comm.Broadcast(failing_kind, static_cast<int>(failing));
  kind = static_cast<ErrorKind>(failing_kind.item<int64_t>());
  if (!err.empty()) throw Error(err + " [rank " + std::to_string(comm.rank()) + "]", kind);
  throw Error(what + " failed on rank " + std::to_string(failing) + " (see its error)", kind);
}

// The data of kind index ki (0: main param, else state key ki-1) of an
// owned piece.
at::Tensor PieceData(const OwnedPiece& p, size_t ki) {
  return ki == 0 ? p.main : SavedState(p.state[ki - 1]);
}

// This rank's shard of bucket b (gaps and padding zero) for kind index ki.
at::Tensor ShardOf(const std::vector<OwnedPiece>& owned, const Bucket& b, int dp, size_t ki) {
  at::Tensor buf = at::zeros({b.ShardSize(dp)}, at::kFloat);
  for (const OwnedPiece& p : owned)
    if (p.bucket == b.index) buf.narrow(0, p.local.begin, p.local.size()).copy_(PieceData(p, ki));
  return buf;
}

// The first `n` elements of that shard as parts, without a copy: the owned
// pieces in shard order (views of the optimizer's storage, on the host)
// and zero tensors for the gaps between them.
std::vector<at::Tensor> ShardParts(const std::vector<OwnedPiece>& owned, const Bucket& b, size_t ki,
                                   int64_t n) {
  std::vector<const OwnedPiece*> in_bucket;
  for (const OwnedPiece& p : owned)
    if (p.bucket == b.index) in_bucket.push_back(&p);
  std::sort(in_bucket.begin(), in_bucket.end(), [](const OwnedPiece* x, const OwnedPiece* y) {
    return x->local.begin < y->local.begin;
  });
  std::vector<at::Tensor> parts;
  int64_t at = 0;
  for (const OwnedPiece* p : in_bucket) {
    if (p->local.begin > at) parts.push_back(at::zeros({p->local.begin - at}, at::kFloat));
    parts.push_back(OnHost(PieceData(*p, ki)));
    at = p->local.end;
  }
  if (at < n) parts.push_back(at::zeros({n - at}, at::kFloat));
  return parts;
}

// The kinds a save writes: ShardedKinds, less the third state under the
// silent bug third_state_key_dropped.
std::vector<std::string> SavedKinds(const DistributedOptimizer& opt) {
  std::vector<std::string> kinds = ShardedKinds(opt);
  if (kinds.size() > 3 && FailpointOn("third_state_key_dropped")) kinds.erase(kinds.begin() + 3);
  return kinds;
}

void AddBucketSizes(std::vector<Pending>& out, const DistributedOptimizer& opt) {
  const BufferLayout& l = opt.layout();
  if (l.buckets().empty()) return;  // every param is layer-wise: no buffer to describe
  std::vector<int64_t> numel, unpadded;
  for (const Bucket& b : l.buckets()) {
    numel.push_back(b.world.size());
    unpadded.push_back(b.numel_unpadded);
  }
  const int64_t nb = static_cast<int64_t>(numel.size());
  const std::string prefix = BufferPrefix(0, opt.model_dtype(), at::kFloat);
  out.push_back({prefix + ".per_bucket_numel", {nb}, 0, {at::tensor(numel, at::kLong)}});
  out.push_back(
      {prefix + ".per_bucket_numel_unpadded", {nb}, 0, {at::tensor(unpadded, at::kLong)}});
}

// What this rank writes for `type`. Collective for the gathered types.
std::vector<Pending> BuildChunks(DistributedOptimizer& opt, ShardingType type) {
  Communicator& comm = opt.comm();
  const int rank = comm.rank(), dp = comm.size();
  const auto& params = opt.params();
  const BufferLayout& layout = opt.layout();
  const c10::ScalarType pdt = opt.model_dtype(), gdt = at::kFloat;
  const std::vector<std::string> kinds = SavedKinds(opt);
  const std::vector<OwnedPiece> owned = opt.Owned();
  const bool layer_wise_state = !FailpointOn("layerwise_state_not_saved");
  std::vector<Pending> out;
  // Layer-wise (Muon) params, whole, in model space, by their owner.
  for (const OwnedPiece& p : owned) {
    if (p.bucket >= 0) continue;
    const ParamInfo& info = params[static_cast<size_t>(p.param)];
    out.push_back({ModelSpaceKey("fp32_param", info.name), info.shape, 0, {OnHost(p.main)}});
    if (!layer_wise_state) continue;
    const std::vector<std::string> names = StateNames(opt, p.child);
    for (size_t k = 0; k < names.size(); ++k)
      out.push_back(
          {ModelSpaceKey(names[k], info.name), info.shape, 0, {OnHost(SavedState(p.state[k]))}});
  }
  switch (type) {
    case ShardingType::kDpReshardable:
      for (const Bucket& b : layout.buckets()) {
        const int64_t shard = b.ShardSize(dp), begin = rank * shard;
        const int64_t n = std::min(shard, b.numel_unpadded - begin);
        if (n <= 0) continue;  // bucket-end padding is never written
        for (size_t ki = 0; ki < kinds.size(); ++ki)
          out.push_back({DpReshardableKey(0, pdt, gdt, b.index, kinds[ki]),
                         {b.numel_unpadded},
                         begin,
                         ShardParts(owned, b, ki, n)});
      }
      if (rank == 0) AddBucketSizes(out, opt);
      break;
    case ShardingType::kFullyShardedModelSpace:
      for (const OwnedPiece& p : owned) {
        if (p.bucket < 0) continue;
        const ParamInfo& info = params[static_cast<size_t>(p.param)];
        for (size_t ki = 0; ki < kinds.size(); ++ki)
          out.push_back({ModelSpaceKey(ki == 0 ? MainKind(type) : kinds[ki], info.name),
                         info.shape,
                         p.param_range.begin,
                         {OnHost(PieceData(p, ki))}});
      }
      break;
    case ShardingType::kFullyReshardable: {
      // Gathered to rank 0, which writes every param whole.
      // One gather per (kind, bucket) of every rank's shard.
      for (size_t ki = 0; ki < kinds.size(); ++ki) {
        for (const Bucket& b : layout.buckets()) {
          std::vector<at::Tensor> shards = comm.Gather(ShardOf(owned, b, dp, ki), 0);
          if (rank != 0) continue;
          const at::Tensor bucket = at::cat(shards);
          for (int pi : b.params) {
            const PlacedParam& p = layout.params()[static_cast<size_t>(pi)];
            const ParamInfo& info = params[static_cast<size_t>(p.param)];
            out.push_back({ModelSpaceKey(ki == 0 ? MainKind(type) : kinds[ki], info.name),
                           info.shape,
                           0,
                           {bucket.narrow(0, p.world.begin - b.world.begin, p.numel)}});
          }
        }
      }
      break;
    }
    case ShardingType::kDpZeroGatherScatter: {
      // The silent bug bucket_offsets_use_padded_sizes keeps each bucket's end padding.
      const bool padded = FailpointOn("bucket_offsets_use_padded_sizes");
      for (size_t ki = 0; ki < kinds.size(); ++ki) {
        std::vector<at::Tensor> parts;
        for (const Bucket& b : layout.buckets()) {
          std::vector<at::Tensor> shards = comm.Gather(ShardOf(owned, b, dp, ki), 0);
          if (rank != 0) continue;
          const at::Tensor bucket = at::cat(shards);
          parts.push_back(padded ? bucket : bucket.narrow(0, 0, b.numel_unpadded));
        }
        if (rank == 0 && !parts.empty()) {
          at::Tensor all = at::cat(parts);
          out.push_back({DpZeroKey(0, pdt, gdt, kinds[ki]), {all.numel()}, 0, {all}});
        }
      }
      if (rank == 0) AddBucketSizes(out, opt);
      break;
    }
  }
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
  BufferRecord buf;
  buf.param_dtype = opt.model_dtype();
  buf.grad_dtype = at::kFloat;
  buf.bucket_size = opt.layout().bucket_size();
  for (const Bucket& b : opt.layout().buckets()) {
    BucketRecord br;
    br.numel = b.world.size();
    br.numel_unpadded = b.numel_unpadded;
    for (int pi : b.params) {
      const PlacedParam& p = opt.layout().params()[static_cast<size_t>(pi)];
      br.params.push_back({opt.params()[static_cast<size_t>(p.param)].name,
                           p.world.begin - b.world.begin, p.numel});
    }
    buf.buckets.push_back(std::move(br));
  }
  m.buffers.push_back(std::move(buf));
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
// of it: {"file": name, "record": FileRecord, "chunks": [chunk records]}.
nlohmann::json WriteRankFile(const fs::path& tmp, int rank, const std::vector<Pending>& chunks) {
  const std::string file = RankFileName(rank);
  const std::string path = (tmp / file).string();
  std::vector<SafetensorsParts> tensors;
  for (const Pending& c : chunks) {
    // One part keeps its own shape (a layer-wise matrix is written 2-D);
    // parts make a 1-D run.
    const std::vector<int64_t> shape =
        c.parts.size() == 1 ? c.parts[0].sizes().vec() : std::vector<int64_t>{c.Numel()};
    tensors.push_back({c.key, shape, c.parts});
  }
  WriteSafetensorsParts(path, tensors,
                        {{"format", kCheckpointFormatName}, {"rank", std::to_string(rank)}},
                        [rank] { Failpoint("save.rank_file_partial", rank); });
  Failpoint("save.after_rank_file", rank);
  const SafetensorsFile header = ReadSafetensorsHeader(path);
  const FileRecord f = RecordFile(path);
  nlohmann::json out = {
      {"file", file},
      {"record",
       {{"bytes", f.bytes}, {"header_bytes", f.header_bytes}, {"header_xxh3", f.header_xxh3}}},
      {"chunks", nlohmann::json::array()}};
  for (const Pending& c : chunks) {
    const SafetensorsEntry* e = nullptr;
    for (const auto& entry : header.entries)
      if (entry.name == c.key) e = &entry;
    if (!e) throw Error("written file " + file + " lacks " + c.key);
    out["chunks"].push_back(
        {{"key", c.key},
         {"dtype", SafetensorsDtype(c.parts[0].scalar_type())},
         {"shape", c.shape},
         {"offset", c.offset},
         {"numel", c.Numel()},
         {"name", c.key},
         {"byte_range", {header.DataOffset() + e->begin, header.DataOffset() + e->end}},
         {"xxh3", Xxh3Hex(c.parts)}});
  }
  return out;
}

// Adds every rank's file and chunks (as WriteRankFile returned them; "" for
// a rank that wrote nothing) to `m`, and checks that each tensor is covered
// exactly once.
void AddRankFiles(CheckpointMetadata& m, const std::vector<std::string>& per_rank) {
  for (const std::string& s : per_rank) {
    if (s.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(s);
    const std::string file = j.at("file").get<std::string>();
    const auto& fr = j.at("record");
    m.files[file] = {fr.at("bytes").get<uint64_t>(), fr.at("header_bytes").get<uint64_t>(),
                     fr.at("header_xxh3").get<std::string>()};
    for (const auto& r : j.at("chunks")) {
      TensorRecord& t = m.tensors[r.at("key").get<std::string>()];
      t.key = r.at("key").get<std::string>();
      t.dtype = ParseSafetensorsDtype(r.at("dtype").get<std::string>());
      t.shape = r.at("shape").get<std::vector<int64_t>>();
      const auto br = r.at("byte_range").get<std::vector<uint64_t>>();
      t.chunks.push_back({r.at("offset").get<int64_t>(), r.at("numel").get<int64_t>(), file,
                          r.at("name").get<std::string>(), br[0], br[1],
                          r.at("xxh3").get<std::string>()});
    }
  }
  for (auto& [key, t] : m.tensors) {
    std::sort(t.chunks.begin(), t.chunks.end(),
              [](const ChunkRecord& a, const ChunkRecord& b) { return a.offset < b.offset; });
    int64_t covered = 0;
    for (const ChunkRecord& c : t.chunks) {
      if (c.offset != covered)
        throw Error("save of " + key + " leaves a gap or overlap at element " +
                    std::to_string(covered));
      covered += c.numel;
    }
    if (covered != t.Numel())
      throw Error("save of " + key + " covers " + std::to_string(covered) + " of " +
                  std::to_string(t.Numel()) + " elements");
  }
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
    std::vector<Pending> chunks = BuildChunks(opt, type);
    std::string written;
    Agree(comm, "writing " + tmp.string(), [&] {
      if (!chunks.empty()) written = WriteRankFile(tmp, rank, chunks).dump();
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

std::set<std::string> ExpectedCheckpointKeys(const DistributedOptimizer& opt, ShardingType type) {
  std::set<std::string> keys;
  const auto& params = opt.params();
  const std::vector<std::string> kinds = ShardedKinds(opt);
  const c10::ScalarType pdt = opt.model_dtype(), gdt = at::kFloat;
  const bool layer_wise_state = !FailpointOn("layerwise_state_not_saved");
  for (const auto& [param, owner] : opt.layer_wise_owners()) {
    const std::string& name = params[static_cast<size_t>(param)].name;
    keys.insert(ModelSpaceKey("fp32_param", name));
    if (!layer_wise_state) continue;
    for (const std::string& k : StateNames(opt, opt.ChildOf(param)))
      keys.insert(ModelSpaceKey(k, name));
  }
  const bool has_buffer = !opt.layout().buckets().empty();
  switch (type) {
    case ShardingType::kDpReshardable:
      for (const Bucket& b : opt.layout().buckets())
        for (const auto& kind : kinds) keys.insert(DpReshardableKey(0, pdt, gdt, b.index, kind));
      break;
    case ShardingType::kDpZeroGatherScatter:
      if (has_buffer)
        for (const auto& kind : kinds) keys.insert(DpZeroKey(0, pdt, gdt, kind));
      break;
    case ShardingType::kFullyReshardable:
    case ShardingType::kFullyShardedModelSpace:
      for (const PlacedParam& p : opt.layout().params())
        for (size_t ki = 0; ki < kinds.size(); ++ki)
          keys.insert(ModelSpaceKey(ki == 0 ? MainKind(type) : kinds[ki],
                                    params[static_cast<size_t>(p.param)].name));
      break;
  }
  if (has_buffer &&
      (type == ShardingType::kDpReshardable || type == ShardingType::kDpZeroGatherScatter)) {
    const std::string prefix = BufferPrefix(0, pdt, gdt);
    keys.insert(prefix + ".per_bucket_numel");
    keys.insert(prefix + ".per_bucket_numel_unpadded");
  }
  return keys;
}

namespace {

std::string List(const std::vector<std::string>& v, size_t most = 3) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > most) s += " (+" + std::to_string(v.size() - most) + " more)";
  return s;
}

std::string SchemaText(const std::map<std::string, std::vector<std::string>>& schemas) {
  std::string s;
  for (const auto& [kind, keys] : schemas) {
    if (!s.empty()) s += "; ";
    s += kind + ": " + List(keys, 10);
  }
  return s;
}

// Optimizer and schema: state keys by name, over every child.
void CheckSchemas(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                  const std::string& dir, const LoadOptions& o) {
  std::map<std::string, std::vector<std::string>> mine;
  std::set<std::string> my_keys, their_keys;
  for (const auto& c : opt.children()) {
    mine[c.config.kind()] = c.schema.Names();
    for (const auto& k : c.schema.Names()) my_keys.insert(k);
  }
  for (const auto& [kind, keys] : m.schemas)
    for (const auto& k : keys) their_keys.insert(k);
  std::vector<std::string> missing, unexpected;
  for (const auto& k : my_keys)
    if (!their_keys.count(k)) missing.push_back(k);
  for (const auto& k : their_keys)
    if (!my_keys.count(k)) unexpected.push_back(k);
  if ((!missing.empty() && !o.allow_missing) || (!unexpected.empty() && !o.ignore_unexpected)) {
    std::string msg = "checkpoint " + dir + " holds optimizer '" + m.optimizer + "' (" +
                      SchemaText(m.schemas) + "); this run is '" + opt.setup().name + "' (" +
                      SchemaText(mine) + "):";
    if (!missing.empty()) msg += " missing state key " + List(missing, 10) + ";";
    if (!unexpected.empty()) msg += " unexpected state key " + List(unexpected, 10) + ";";
    throw Error(msg);
  }
  if (missing.empty() && unexpected.empty() && m.optimizer != opt.setup().name)
    throw Error("checkpoint " + dir + " holds optimizer '" + m.optimizer + "', this run is '" +
                opt.setup().name + "' (same state keys, different update)");
}

// The lr schedule and its peak: equal, or the options say which wins.
void CheckLrSchedule(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                     const std::string& dir, const LoadOptions& o) {
  const double run_max = opt.schedule_peak_lr();
  if (m.lr_schedule.SameShape(opt.lr_schedule()) && m.max_lr == run_max) return;
  if (o.lr_schedule != LoadOptions::LrScheduleChoice::kMustMatch) return;
  std::ostringstream msg;
  msg << "checkpoint " << dir << " was trained with lr " << m.max_lr << " ("
      << m.lr_schedule.Describe() << "); this run has lr " << run_max << " ("
      << opt.lr_schedule().Describe()
      << "): say which wins with --override-lr-schedule (this run's) or "
         "--use-checkpoint-lr-schedule";
  throw Error(msg.str());
}

// Params: names, shapes, count, model dtype.
void CheckParams(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                 const std::string& dir, const LoadOptions& o) {
  for (size_t i = 0; i < opt.params().size(); ++i) {
    const ParamInfo& p = opt.params()[i];
    const ParamInfo* q = m.FindParam(p.name);
    if (!q) throw Error("checkpoint " + dir + " has no param " + p.name);
    if (q->shape != p.shape)
      throw Error("checkpoint " + dir + ": param " + p.name + " has shape " + q->ShapeString() +
                  ", this run " + p.ShapeString());
  }
  if (m.params.size() != opt.params().size() && !o.ignore_unexpected)
    throw Error("checkpoint " + dir + " holds " + std::to_string(m.params.size()) +
                " params, this run " + std::to_string(opt.params().size()));
  if (m.model_dtype != opt.model_dtype())
    throw Error("checkpoint " + dir + " was saved from a " + DtypeName(m.model_dtype) +
                " model, this run is " + DtypeName(opt.model_dtype()));
}

// Groups by identifying keys, with the same members.
void CheckGroups(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                 const std::string& dir, const LoadOptions& o) {
  for (const GroupRecord& want : GroupRecords(opt.children(), opt.params())) {
    const GroupRecord* found = nullptr;
    for (const auto& r : m.groups)
      if (r.Id() == want.Id()) found = &r;
    if (!found) {
      if (o.allow_missing) continue;
      throw Error("checkpoint " + dir + " has no param group " + want.Id());
    }
    if (found->params != want.params)
      throw Error("checkpoint " + dir + ": param group " + want.Id() + " holds other params");
  }
}

// The layout constraints of the types that store buffer space.
void CheckLayout(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                 const std::string& dir) {
  if (m.sharding_type != ShardingType::kDpReshardable &&
      m.sharding_type != ShardingType::kDpZeroGatherScatter)
    return;
  const BufferLayout& l = opt.layout();
  const std::string t = ShardingTypeName(m.sharding_type);
  const std::vector<BucketRecord> none;
  const std::vector<BucketRecord>& theirs = m.buffers.empty() ? none : m.buffers[0].buckets;
  const std::string hint = " (bucket size " +
                           std::to_string(m.buffers.empty() ? 0 : m.buffers[0].bucket_size) +
                           " at save, " + std::to_string(l.bucket_size()) + " now); " + t +
                           " can change only the DP size";
  for (const Bucket& b : l.buckets()) {
    if (static_cast<size_t>(b.index) >= theirs.size()) break;
    const BucketRecord& r = theirs[static_cast<size_t>(b.index)];
    if (r.numel_unpadded != b.numel_unpadded)
      throw Error("layout mismatch: bucket " + std::to_string(b.index) + " has numel_unpadded " +
                  std::to_string(r.numel_unpadded) + " in checkpoint " + dir + ", " +
                  std::to_string(b.numel_unpadded) + " in this run" + hint);
    for (size_t j = 0; j < b.params.size(); ++j) {
      const PlacedParam& p = l.params()[static_cast<size_t>(b.params[j])];
      const std::string& name = opt.params()[static_cast<size_t>(p.param)].name;
      if (j >= r.params.size() || r.params[j].name != name ||
          r.params[j].offset != p.world.begin - b.world.begin)
        throw Error("layout mismatch: bucket " + std::to_string(b.index) + " of checkpoint " + dir +
                    " places params differently (" + name + ")" + hint);
    }
  }
  if (theirs.size() != l.buckets().size())
    throw Error("layout mismatch: checkpoint " + dir + " has " + std::to_string(theirs.size()) +
                " buckets, this run " + std::to_string(l.buckets().size()) + hint);
}

// The tensor keys: every expected one present (fully_reshardable accepts
// fp32_param for the main param), no unexpected ones, unless allowed.
void CheckTensorKeys(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                     const std::string& dir, const LoadOptions& o) {
  const std::set<std::string> expected = ExpectedCheckpointKeys(opt, m.sharding_type);
  std::vector<std::string> miss, extra;
  for (const auto& k : expected) {
    if (m.tensors.count(k)) continue;
    const std::string alias = "optimizer.state.param.";
    if (k.rfind(alias, 0) == 0 &&
        m.tensors.count("optimizer.state.fp32_param." + k.substr(alias.size())))
      continue;
    miss.push_back(k);
  }
  for (const auto& [k, t] : m.tensors) {
    if (expected.count(k)) continue;
    const std::string alias = "optimizer.state.fp32_param.";
    if (k.rfind(alias, 0) == 0 && expected.count("optimizer.state.param." + k.substr(alias.size())))
      continue;
    extra.push_back(k);
  }
  // With allow_missing, missing state tensors are zero-filled; main params never are.
  std::vector<std::string> fatal_missing;
  for (const auto& k : miss) {
    const bool is_main = k.find(".param.") != std::string::npos ||
                         k.find(".fp32_param.") != std::string::npos ||
                         (k.size() > 6 && k.compare(k.size() - 6, 6, ".param") == 0) ||
                         k.find("per_bucket_numel") != std::string::npos;
    if (!o.allow_missing || is_main) fatal_missing.push_back(k);
  }
  if (!fatal_missing.empty() || (!extra.empty() && !o.ignore_unexpected)) {
    std::string msg = "checkpoint " + dir + " (" + ShardingTypeName(m.sharding_type) +
                      ") does not match this run:";
    if (!fatal_missing.empty()) msg += " missing tensor " + List(fatal_missing) + ";";
    if (!extra.empty() && !o.ignore_unexpected) msg += " unexpected tensor " + List(extra) + ";";
    throw Error(msg);
  }
}

// Checks what does not depend on this rank, most telling first.
void ValidateCompatibility(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                           const std::string& dir, const LoadOptions& o) {
  CheckSchemas(opt, m, dir, o);
  CheckParams(opt, m, dir, o);
  CheckGroups(opt, m, dir, o);
  CheckLayout(opt, m, dir);
  CheckTensorKeys(opt, m, dir, o);
  CheckLrSchedule(opt, m, dir, o);
}

// Where an owned piece starts in its bucket's space, as a load reads it:
// p.in_bucket.begin, or elsewhere under the silent bugs named here (each
// kept inside the bucket's unpadded range, so the read itself succeeds).
int64_t InBucketBegin(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                      const OwnedPiece& p) {
  const BufferLayout& l = opt.layout();
  const Bucket& b = l.buckets()[static_cast<size_t>(p.bucket)];
  const int dp = opt.comm().size(), rank = opt.comm().rank();
  int64_t begin = p.in_bucket.begin;
  if (FailpointOn("ignore_param_start_padding")) {
    // Offsets of the bucket's params as if each started right after the previous one.
    int64_t packed = 0;
    for (int pi : b.params) {
      const PlacedParam& q = l.params()[static_cast<size_t>(pi)];
      if (q.param == p.param) break;
      packed += q.numel;
    }
    const int64_t param_start = begin - p.param_range.begin;  // p's start in the bucket
    begin = packed + (begin - param_start);
  }
  int other = rank;
  if (m.sharding_type == ShardingType::kDpReshardable && m.dp_size != dp &&
      FailpointOn("reshard_rank_order_reversed"))
    other = dp - 1 - rank;
  if (m.sharding_type == ShardingType::kDpZeroGatherScatter &&
      FailpointOn("wrong_dp_rank_in_dp_zero_scatter"))
    other = (rank + 1) % dp;
  const int64_t moved = begin + (other - rank) * b.ShardSize(dp);
  if (moved >= 0 && moved + p.param_range.size() <= b.numel_unpadded) begin = moved;
  return begin;
}

// Key and element range of `kind` of an owned piece.
std::pair<std::string, int64_t> Locate(const DistributedOptimizer& opt, const CheckpointReader& r,
                                       const OwnedPiece& p, const std::string& kind, bool main,
                                       const std::vector<int64_t>& bucket_prefix) {
  const std::string& name = opt.params()[static_cast<size_t>(p.param)].name;
  if (p.bucket < 0) return {ModelSpaceKey(main ? "fp32_param" : kind, name), p.param_range.begin};
  const ShardingType t = r.metadata().sharding_type;
  switch (t) {
    case ShardingType::kDpReshardable:
      return {DpReshardableKey(0, opt.model_dtype(), at::kFloat, p.bucket, kind),
              InBucketBegin(opt, r.metadata(), p)};
    case ShardingType::kDpZeroGatherScatter:
      return {DpZeroKey(0, opt.model_dtype(), at::kFloat, kind),
              bucket_prefix[static_cast<size_t>(p.bucket)] + InBucketBegin(opt, r.metadata(), p)};
    case ShardingType::kFullyReshardable: {
      std::string key = ModelSpaceKey(main ? "param" : kind, name);
      if (main && !r.Has(key)) key = ModelSpaceKey("fp32_param", name);
      return {key, p.param_range.begin};
    }
    case ShardingType::kFullyShardedModelSpace:
      return {ModelSpaceKey(main ? "fp32_param" : kind, name), p.param_range.begin};
  }
  throw Error("unknown sharding type");
}

}  // namespace

std::vector<std::string> LoadCheckpoint(DistributedOptimizer& opt, const std::string& dir,
                                        const LoadOptions& options) {
  Communicator& comm = opt.comm();
  std::vector<std::string> warnings;
  std::vector<std::pair<at::Tensor, at::Tensor>> plan;  // (destination view, staged data)
  int64_t step = 0;
  LrSchedule schedule;
  double max_lr = 0.0;
  Agree(comm, "loading checkpoint " + dir, [&] {
    CheckpointReader reader(dir);
    const CheckpointMetadata& m = reader.metadata();
    ValidateCompatibility(opt, m, dir, options);
    warnings = HyperparamDifferences(m.optimizer_config, SetupJson(opt.setup()));
    if (options.strict_hparams && !warnings.empty()) {
      std::string all;
      for (const auto& w : warnings) all += (all.empty() ? "" : "; ") + w;
      throw Error("checkpoint " + dir +
                  " was saved with other hyperparameters (--strict-hparams): " + all);
    }
    Failpoint("load.before_read", comm.rank());
    std::vector<int64_t> prefix;
    int64_t acc = 0;
    for (const Bucket& b : opt.layout().buckets()) {
      prefix.push_back(acc);
      acc += b.numel_unpadded;
    }
    for (OwnedPiece& p : opt.Owned()) {
      const std::vector<std::string> names = StateNames(opt, p.child);
      for (size_t ki = 0; ki <= names.size(); ++ki) {
        const bool main = ki == 0;
        const std::string kind = main ? "param" : names[ki - 1];
        at::Tensor dst = main ? p.main : p.state[ki - 1];
        const auto [key, begin] = Locate(opt, reader, p, kind, main, prefix);
        if (!reader.Has(key)) {
          plan.push_back({dst, at::zeros_like(dst)});  // allowed missing (validated above)
          continue;
        }
        const TensorRecord& rec = reader.Record(key);
        if (rec.dtype != dst.scalar_type())
          throw Error("checkpoint " + dir + ": tensor " + key + " has dtype " +
                      DtypeName(rec.dtype) + ", expected " + DtypeName(dst.scalar_type()));
        plan.push_back({dst, reader.ReadRange(key, begin, p.param_range.size())});
      }
    }
    step = m.step;
    schedule = m.lr_schedule;
    max_lr = m.max_lr;
  });
  for (auto& [dst, data] : plan) dst.copy_(data);
  opt.SetStep(FailpointOn("step_off_by_one_on_load") ? step - 1 : step);
  if (options.lr_schedule == LoadOptions::LrScheduleChoice::kCheckpoint) {
    schedule.peak_lr = max_lr;
    opt.SetLrSchedule(schedule);
  }
  if (FailpointOn("lr_schedule_restarts_on_load")) opt.RestartLrScheduleAt(opt.step());
  if (!FailpointOn("skip_post_load_param_sync")) opt.RebuildModelParams();
  return warnings;
}

StateDict ReadModelSpace(CheckpointReader& reader) {
  const CheckpointMetadata& m = reader.metadata();
  StateDict sd;
  sd.optimizer = m.optimizer;
  sd.step = m.step;
  sd.groups = m.groups;
  // Where each buffer param lies: bucket, offset in bucket; prefix of unpadded sizes.
  std::map<std::string, std::pair<int, int64_t>> placed;
  std::vector<int64_t> prefix;
  int64_t acc = 0;
  if (!m.buffers.empty()) {
    for (size_t b = 0; b < m.buffers[0].buckets.size(); ++b) {
      prefix.push_back(acc);
      acc += m.buffers[0].buckets[b].numel_unpadded;
      for (const auto& member : m.buffers[0].buckets[b].params)
        placed[member.name] = {static_cast<int>(b), member.offset};
    }
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ParamInfo& p = m.params[i];
    auto schema = m.schemas.find(m.param_child[i]);
    if (schema == m.schemas.end())
      throw Error(reader.dir() + ": param " + p.name + " names optimizer " + m.param_child[i] +
                  " without a schema");
    auto read = [&](const std::string& kind, bool main) -> at::Tensor {
      auto where = placed.find(p.name);
      if (m.layer_wise_owner.count(p.name) || where == placed.end() ||
          m.sharding_type == ShardingType::kFullyShardedModelSpace ||
          m.sharding_type == ShardingType::kFullyReshardable) {
        std::string key = ModelSpaceKey(main ? "fp32_param" : kind, p.name);
        if (main && !reader.Has(key)) key = ModelSpaceKey("param", p.name);
        return reader.ReadFull(key);
      }
      const auto [bucket, offset] = where->second;
      const std::string key = m.sharding_type == ShardingType::kDpReshardable
                                  ? DpReshardableKey(0, m.model_dtype, at::kFloat, bucket, kind)
                                  : DpZeroKey(0, m.model_dtype, at::kFloat, kind);
      const int64_t begin = offset + (m.sharding_type == ShardingType::kDpReshardable
                                          ? 0
                                          : prefix[static_cast<size_t>(bucket)]);
      return reader.ReadRange(key, begin, p.Numel()).view(p.shape);
    };
    const at::Tensor main = read("param", true);
    sd.tensors[ParamKey(p.name)] = main.to(m.model_dtype);
    if (m.model_dtype != at::kFloat) sd.tensors[MainParamKey(p.name)] = main;
    for (const auto& key : schema->second)
      sd.tensors[StateTensorKey(key, p.name)] = read(key, false);
  }
  return sd;
}

}  // namespace shardcheck
