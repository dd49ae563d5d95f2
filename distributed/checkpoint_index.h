// How metadata.json's index is assembled (docs/checkpoint-format.md): each
// rank describes the file it wrote as JSON (RankFileText), rank 0 gathers
// the descriptions and adds them to the metadata (AddRankFiles), beside the
// layout fingerprint (LayoutRecord). A save (distributed/checkpoint.cc) and
// the dry mode (distributed/dry_checkpoint.h) share these steps, so the dry
// mode measures the metadata a save writes. Internal to distributed/.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "distributed/layout.h"
#include "distributed/safetensors.h"
#include "spec/params.h"

namespace shardcheck {

// A chunk of a rank's file as metadata.json records it: elements [offset,
// offset + numel) of `key` (global shape `shape`), stored under the tensor
// name `key` in the file, with the XXH3-64 of its bytes.
struct WrittenChunk {
  const std::string& key;
  c10::ScalarType dtype;
  const std::vector<int64_t>& shape;
  int64_t offset = 0;
  int64_t numel = 0;
  std::string xxh3;
};

// What a rank sends rank 0 of the file it wrote, as compact JSON text
// written without a DOM (distributed/json_text.h):
//   {"file": F, "record": {"bytes", "header_bytes", "header_xxh3"},
//    "chunks": [{"key", "dtype", "shape", "offset", "numel", "byte_range",
//                "xxh3"}, ...]}
// (a chunk is stored in the file under its key). `entries` are the file's
// header entries (any order; looked up by name in O(1)), `data_offset`
// where its data section starts. Throws Error when a chunk has no entry.
std::string RankFileText(const std::string& file, const FileRecord& f, uint64_t data_offset,
                         const std::vector<SafetensorsEntry>& entries,
                         const std::vector<WrittenChunk>& chunks);

// Adds every rank's file and chunks (RankFileText's text, parsed with
// simdjson; "" for a rank that wrote nothing) to `m`, and checks that each
// tensor is covered exactly once. Throws Error naming the rank and field of
// a malformed record, or the tensor of a gap or overlap.
void AddRankFiles(CheckpointMetadata& m, const std::vector<std::string>& per_rank);

// The layout fingerprint metadata.json records of the buffer: its buckets,
// their sizes and their params' places.
BufferRecord LayoutRecord(const BufferLayout& layout, const std::vector<ParamInfo>& params,
                          c10::ScalarType model_dtype);

// The "__metadata__" of rank `rank`'s safetensors file.
std::map<std::string, std::string> RankFileTags(int rank);

// The keys of the two bucket-size tensors (int64, one element per bucket)
// that rank 0 writes for the types that store buffer space: padded, then
// unpadded sizes.
std::vector<std::string> BucketSizeKeys(c10::ScalarType model_dtype);

}  // namespace shardcheck
