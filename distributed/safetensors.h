// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON (padded with spaces to a
// multiple of 8), then the raw little-endian tensor bytes, fully indexed by
// the header's data_offsets with no holes.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "distributed/name_index.h"

namespace shardcheck {

// "F32", "BF16", ... ; throws Error for a dtype safetensors cannot hold.
std::string SafetensorsDtype(c10::ScalarType dtype);
c10::ScalarType ParseSafetensorsDtype(const std::string& name);

struct SafetensorsEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

// A tensor to write as the concatenation of `parts` (CPU, contiguous, one
// dtype; any shapes), under the header shape `shape`, whose element count
// is the parts' total. Each part is written from its own memory.
struct SafetensorsParts {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<at::Tensor> parts;
};

// A tensor of a file to lay out, without its data.
struct SafetensorsSpec {
  std::string name;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> shape;
};

// A file's header as a write lays it out: `json` is the N bytes after the
// length field (padded with spaces to a multiple of 8), `entries` the
// tensors in the order given with their data offsets. Costs O(tensors) (a
// rank's file may hold tens of thousands). Throws Error naming `path` on a
// duplicate name, the name "__metadata__" or a dtype safetensors cannot hold.
struct SafetensorsLayout {
  std::string json;
  std::vector<SafetensorsEntry> entries;
  uint64_t DataOffset() const { return 8 + json.size(); }
  uint64_t FileBytes() const { return DataOffset() + (entries.empty() ? 0 : entries.back().end); }
};
SafetensorsLayout LayOutSafetensors(const std::string& path,
                                    const std::vector<SafetensorsSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata = {});

// Writes `tensors` (CPU; any layout, written contiguous) in the order given,
// with `metadata` as "__metadata__", atomically: to a temporary file in the
// same folder, fsync, rename. Throws Error naming the path; on failure the
// destination is untouched. Returns the header length N. `midway` as in
// WriteFileAtomic.
uint64_t WriteSafetensors(const std::string& path,
                          const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                          const std::map<std::string, std::string>& metadata = {},
                          const std::function<void()>& midway = {});

// Shown each block of tensor `tensor`'s data (its index in the list
// given) just before it is written, in order: a caller checksums each
// tensor's bytes in the same pass as the write.
using TensorBytesObserver = std::function<void(size_t tensor, const void* data, size_t size)>;

// The same for tensors given in parts (a checkpoint's shard with its
// padding gaps, written without assembling it first). Throws Error naming
// the path and tensor when a part's dtype differs from the first's or the
// element count does not match the shape.
uint64_t WriteSafetensorsParts(const std::string& path,
                               const std::vector<SafetensorsParts>& tensors,
                               const std::map<std::string, std::string>& metadata = {},
                               const std::function<void()>& midway = {},
                               const TensorBytesObserver& observe = {});

// A parsed file: header entries (in data order) and metadata.
struct SafetensorsFile {
  std::string path;
  uint64_t header_size = 0;  // N
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  // Byte offset of the data section in the file (8 + N).
  uint64_t DataOffset() const { return 8 + header_size; }
};

// Reads and validates the header of `path` (sizes, dtypes, offsets within
// the file, no overlap or hole). Throws Error naming the file and tensor.
SafetensorsFile ReadSafetensorsHeader(const std::string& path);

// The same validation of a header already read: `json` is the N bytes
// after the length field of a file of `file_size` bytes (no file access;
// the fuzz target's entry point). Throws Error naming `path`.
SafetensorsFile ParseSafetensorsHeader(const std::string& path, const std::string& json,
                                       uint64_t file_size);

// The names of `entries` indexed by position (id i: entries[i]); the
// names are unique in a parsed header and in a layout. The index points
// at the names' bytes: `entries` must stay in place and unchanged while
// it is used (a moved std::string may move short names' bytes).
NameIndex IndexEntryNames(const std::vector<SafetensorsEntry>& entries);

// Reads every tensor of `path` (validated as above).
std::map<std::string, at::Tensor> ReadSafetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

}  // namespace shardcheck
