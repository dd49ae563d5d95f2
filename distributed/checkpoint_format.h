// The on-disk checkpoint format (docs/checkpoint-format.md): a folder of
// per-rank safetensors files plus metadata.json, the index and commit
// marker. This file holds the metadata model, the key names of the four
// sharding types (checkpoint_format.cc), and the reader that assembles any
// element range of any tensor from its chunks, verifying each chunk's
// xxh3-64 checksum (checkpoint_reader.cc). The tensor index itself is
// distributed/tensor_table.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/tensor_table.h"
#include "distributed/sharding_type.h"
#include "spec/error.h"
#include "spec/lr_schedule.h"
#include "spec/params.h"
#include "spec/state_dict.h"

namespace shardcheck {

class ReadOnlyFile;  // distributed/file_util.h

// Version 2 added the lr schedule. Version 1 is still read: its schedule is
// taken as constant at the lr of its first child (docs/checkpoint-format.md).
// Version 3 added checksums over metadata.json itself and over every file's
// header, and the list of files (size included); versions 1 and 2 are read
// without them.
inline constexpr int kCheckpointFormatVersion = 3;
inline constexpr int kOldestReadableFormatVersion = 1;
inline constexpr const char* kCheckpointFormatName = "shardcheck-checkpoint";
inline constexpr const char* kMetadataFile = "metadata.json";


// "rank_00003.safetensors".
std::string RankFileName(int rank);

// Key names (Megatron-LM's). `kind` is "param" (fp32 main param) or a state key.
std::string TorchDtypeName(c10::ScalarType t);  // "torch.bfloat16"
std::string BufferPrefix(int gbuf, c10::ScalarType param_dtype, c10::ScalarType grad_dtype);
std::string DpReshardableKey(int gbuf, c10::ScalarType pdt, c10::ScalarType gdt, int bucket,
                             const std::string& kind);
std::string DpZeroKey(int gbuf, c10::ScalarType pdt, c10::ScalarType gdt, const std::string& kind);
// "optimizer.state.<kind>.<param name>".
std::string ModelSpaceKey(const std::string& kind, const std::string& param);

// A bucket of the layout fingerprint with its params' places.
struct BucketRecord {
  int64_t numel = 0;  // padded
  int64_t numel_unpadded = 0;
  struct Member {
    std::string name;
    int64_t offset = 0;  // in the bucket
    int64_t numel = 0;
  };
  std::vector<Member> params;  // buffer order
};

struct BufferRecord {
  c10::ScalarType param_dtype = c10::kFloat, grad_dtype = c10::kFloat;
  int64_t bucket_size = 0;
  std::vector<BucketRecord> buckets;
};

// The chunks of `t` that hold elements of [begin, begin + numel): indices
// [first, last) of t.chunks (sorted by offset, disjoint), found by binary
// search. Empty when numel <= 0.
// `hint` (in and out, may be null): where to look first, the first chunk
// of the caller's previous span; a rank reads its pieces in offset order,
// so the next range usually starts in that chunk or the one after, found
// in O(1). A wrong hint costs the binary search, never a wrong answer.
struct ChunkSpan {
  size_t first = 0, last = 0;
  size_t Size() const { return last - first; }
};
ChunkSpan ChunksCovering(const TensorRecord& t, int64_t begin, int64_t numel,
                         size_t* hint = nullptr);

// One file of the checkpoint folder (format version 3 on).
struct FileRecord {
  uint64_t bytes = 0;         // the whole file
  uint64_t header_bytes = 0;  // 8 + N: the length field and the JSON header
  std::string header_xxh3;    // XXH3-64 of those header_bytes
};

struct CheckpointMetadata {
  int format_version = kCheckpointFormatVersion;
  ShardingType sharding_type = ShardingType::kDpReshardable;
  std::string optimizer;                    // setup name
  nlohmann::ordered_json optimizer_config;  // children with config and schema
  // Child kind -> its schema keys, as each child's registry entry declares them.
  std::map<std::string, std::vector<std::string>> schemas;
  int64_t step = 0;
  LrSchedule lr_schedule;           // the schedule the run followed up to `step`
  double max_lr = 0.0;              // the run's lr: the schedule's peak
  std::vector<GroupRecord> groups;  // params listed by name (identifying keys + membership)
  int dp_size = 1;
  c10::ScalarType model_dtype = c10::kFloat;
  std::vector<ParamInfo> params;                // registration order
  std::vector<std::string> param_child;         // child kind owning each param
  std::vector<BufferRecord> buffers;            // layout fingerprint of the sharded child
  std::map<std::string, int> layer_wise_owner;  // layer-wise param name -> rank at save
  std::map<std::string, FileRecord> files;      // by file name; empty before version 3
  TensorTable tensors;                          // in key order

  nlohmann::ordered_json ToJson() const;
  // Throws Error naming `path` and the offending field.
  static CheckpointMetadata FromJson(const nlohmann::json& j, const std::string& path);
  const ParamInfo* FindParam(const std::string& name) const;
};

// metadata.json's text, sealed with its checksum (distributed/sealed_json.h).
std::string MetadataFileText(const CheckpointMetadata& m);
// Reads and validates `path` (a metadata.json): checksum first (required
// from format version 3 on), then JSON, then every field. Throws Error
// naming the file and field.
CheckpointMetadata ReadMetadataFile(const std::string& path);
// The same, of a metadata.json's text (no file access; the fuzz target's
// entry point). Errors name `path`.
CheckpointMetadata ParseMetadataText(const std::string& text, const std::string& path);

// The FileRecord of a written file, read back from disk.
FileRecord RecordFile(const std::string& path);

// Reads a committed checkpoint folder. Construction refuses a ".tmp-"
// folder (an interrupted save), verifies and parses metadata.json, and
// checks that the folder holds exactly the files it names, each of its
// recorded size with a matching header checksum, parsing as safetensors
// with the indexed tensors. Not thread-safe.
class CheckpointReader {
 public:
  // Throws Error naming the folder or file (no metadata.json: "not a
  // committed checkpoint"; unknown format version; missing or truncated file).
  explicit CheckpointReader(const std::string& dir);
  // Not copyable: the index points into this reader's metadata.
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& dir() const { return dir_; }
  const CheckpointMetadata& metadata() const { return meta_; }
  bool Has(const std::string& key) const { return meta_.tensors.Find(key) != nullptr; }
  const TensorRecord& Record(const std::string& key) const;

  // Elements [begin, begin + numel) of the flattened tensor `key`, in its
  // dtype. Every chunk it touches is checksum-verified (once). Throws Error
  // naming the key, file and range when the range is not fully covered or a
  // checksum does not match. When one chunk holds the whole range, the
  // result is a view of that chunk's verified data (no copy): read it, do
  // not write into it.
  at::Tensor ReadRange(const std::string& key, int64_t begin, int64_t numel);
  // The whole tensor in its global shape.
  at::Tensor ReadFull(const std::string& key);

  // Elements [begin, begin + numel) of the flattened tensor `key`.
  struct Range {
    std::string key;
    int64_t begin = 0;
    int64_t numel = 0;
  };
  // Every range of `ranges`, each in a tensor of its own (not a view of
  // anything the reader keeps), with the checks and errors of ReadRange.
  // Each chunk touched is read once, in file order: the bytes a range needs
  // go straight into its result, the rest of the chunk passes through a
  // small buffer for its checksum, so a load stages what it needs and no
  // more (a dp_zero_gather_scatter chunk holds every rank's pieces). A
  // result is complete and verified once the call returns.
  std::vector<at::Tensor> ReadRanges(const std::vector<Range>& ranges);
  // Verifies every chunk of every tensor. Throws on the first mismatch.
  void VerifyAll();

 private:
  const at::Tensor& Chunk(const TensorRecord& t, const ChunkRecord& c);
  // Throws Error naming the range when it leaves t.
  void CheckRange(const TensorRecord& t, int64_t begin, int64_t numel) const;
  // The error of a range with no chunk for elements [from, to).
  Error NoData(const std::string& key, int64_t from, int64_t to) const;
  // Where ReadRanges puts a chunk's bytes (checkpoint_reader.cc).
  struct Piece;
  // Reads chunk c of t once, its pieces' bytes into their destinations,
  // verifying the checksum over every byte.
  void StreamChunk(const TensorRecord& t, const ChunkRecord& c, std::vector<Piece>& pieces);
  // The open file `name` of this checkpoint (opened once); `key` names the
  // tensor read in an error.
  const ReadOnlyFile& File(const std::string& name, const std::string& key);

  std::string dir_;
  CheckpointMetadata meta_;
  size_t hint_ = 0;    // ChunksCovering's, from the last ReadRange
  std::map<std::string, at::Tensor> chunk_cache_;  // "file:name" -> verified data
  std::map<std::string, std::shared_ptr<ReadOnlyFile>> files_;  // by file name
  std::unique_ptr<char[]> skip_;  // StreamChunk's bytes no range needs pass through here
};

// XXH3-64 of `bytes` as 16 lowercase hex digits.
std::string Xxh3Hex(const void* data, size_t size);
// The same of the concatenation of `parts` (contiguous CPU tensors' bytes).
std::string Xxh3Hex(const std::vector<at::Tensor>& parts);

// The same, over bytes given in pieces as they pass (a save checksums each
// chunk while writing it, a load while reading it). Throws Error
// (kEnvironment) when the hash state cannot be made.
class Xxh3Stream {
 public:
  Xxh3Stream();
  void Update(const void* data, size_t size);
  std::string Hex() const;

 private:
  std::shared_ptr<void> state_;  // XXH3_state_t, freed with XXH3_freeState
};

}  // namespace shardcheck
