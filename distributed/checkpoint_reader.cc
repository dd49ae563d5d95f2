// CheckpointReader and ChunksCovering (distributed/checkpoint_format.h):
// opening a committed checkpoint, checking its files against metadata.json,
// and reading verified ranges of its tensors.
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <filesystem>

#include "distributed/checkpoint_format.h"
#include "distributed/file_util.h"
#include "distributed/host_staging.h"
#include "distributed/name_index.h"
#include "distributed/safetensors.h"
#include "spec/error.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

bool IsInterruptedSaveName(const std::string& name) {
  const size_t at = name.rfind(".tmp-");
  return at != std::string::npos && at + 5 < name.size() &&
         name.find_first_not_of("0123456789abcdef", at + 5) == std::string::npos;
}

// Version 3: the folder holds exactly metadata.json and the listed files,
// each of its recorded size and header checksum.
void CheckListedFiles(const std::string& dir, const CheckpointMetadata& m) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name != kMetadataFile && !m.files.count(name))
      throw Error("checkpoint " + dir + ": unexpected file " + name + " (not listed in " +
                  kMetadataFile + ")");
  }
  for (const auto& [name, f] : m.files) {
    const std::string path = (fs::path(dir) / name).string();
    if (!fs::exists(path)) throw Error("checkpoint " + dir + ": file " + name + " is missing");
    const uint64_t bytes = fs::file_size(path);
    if (bytes != f.bytes)
      throw Error(path + ": " + std::to_string(bytes) + " bytes, " + kMetadataFile + " records " +
                  std::to_string(f.bytes) + (bytes < f.bytes ? " (truncated)" : ""));
    const std::string header = ReadFilePrefix(path, f.header_bytes);
    const std::string sum = Xxh3Hex(header.data(), header.size());
    if (sum != f.header_xxh3)
      throw Error(path + ": header checksum mismatch (xxh3 " + sum + ", expected " + f.header_xxh3 +
                  "): the file is corrupt");
  }
}

// A file's safetensors header with its entries by name: a file may hold
// every tensor of the checkpoint (rank 0 of the gathered types), so each
// chunk's entry is found in O(1), not by a scan of the header.
struct IndexedHeader {
  SafetensorsFile header;
  NameIndex by_name;  // into header.entries' names: built once the header is in place
};

// Every file the tensors name: present, a safetensors file, holding each
// chunk's tensor at its indexed bytes in its dtype.
void CheckIndexedEntries(const std::string& dir, const CheckpointMetadata& m) {
  std::map<std::string, IndexedHeader> files;
  for (const TensorRecord& t : m.tensors) {
    for (const ChunkRecord& c : t.chunks) {
      auto it = files.find(c.file);
      const auto path = [&] { return (fs::path(dir) / c.file).string(); };
      if (it == files.end()) {
        if (!fs::exists(path()))
          throw Error("checkpoint " + dir + ": file " + c.file + " is missing (tensor " + t.key +
                      ")");
        it = files.emplace(c.file, IndexedHeader{ReadSafetensorsHeader(path()), NameIndex()}).first;
        it->second.by_name = IndexEntryNames(it->second.header.entries);  // the header now in place
      }
      const SafetensorsFile& f = it->second.header;
      const int64_t id = it->second.by_name.Find(c.name);
      if (id < 0) throw Error(path() + " lacks tensor " + c.name + " (indexed for " + t.key + ")");
      const SafetensorsEntry& e = f.entries[static_cast<size_t>(id)];
      if (f.DataOffset() + e.begin != c.byte_begin || f.DataOffset() + e.end != c.byte_end ||
          e.dtype != t.dtype)
        throw Error(path() + ", tensor " + c.name + ": header disagrees with " + kMetadataFile +
                    " (byte range or dtype)");
    }
  }
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error("checkpoint " + dir + " does not exist");
  if (!fs::is_directory(dir, ec))
    throw Error("checkpoint " + dir + " is a file, not a checkpoint folder" +
                (fs::path(dir).extension() == ".safetensors"
                     ? std::string(" (a .safetensors file: compare it with `shardcheck ckpt-diff`)")
                     : std::string()));
  std::string name = dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  if (IsInterruptedSaveName(fs::path(name).filename().string()))
    throw Error("checkpoint " + dir +
                " is an incomplete save (interrupted before its commit; shardcheck gc removes it)");
  const std::string meta_path = (fs::path(dir) / kMetadataFile).string();
  if (!fs::exists(meta_path))
    throw Error("checkpoint " + dir + " has no " + kMetadataFile +
                ": not a committed checkpoint (an interrupted save leaves a .tmp- folder)");
  meta_ = ReadMetadataFile(meta_path);
  if (meta_.format_version >= 3) CheckListedFiles(dir, meta_);
  CheckIndexedEntries(dir, meta_);
}

const TensorRecord& CheckpointReader::Record(const std::string& key) const {
  const TensorRecord* t = meta_.tensors.Find(key);
  if (!t) throw Error("checkpoint " + dir_ + " has no tensor " + key);
  return *t;
}

namespace {

// The error of chunk c whose bytes hash to `sum`.
Error ChecksumMismatch(const TensorRecord& t, const ChunkRecord& c, const std::string& sum) {
  return Error("checksum mismatch in " + c.file + ", tensor " + t.key + " (elements " +
               std::to_string(c.offset) + ".." + std::to_string(c.offset + c.numel) + "): xxh3 " +
               sum + ", expected " + c.xxh3);
}

}  // namespace

const ReadOnlyFile& CheckpointReader::File(const std::string& name, const std::string& key) {
  auto it = files_.find(name);
  if (it != files_.end()) return *it->second;
  const std::string path = (fs::path(dir_) / name).string();
  try {
    return *files_.emplace(name, std::make_shared<ReadOnlyFile>(path)).first->second;
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (tensor " + key + ")");
  }
}

// Bytes [begin, end) of a chunk (relative to its first byte), bound for `dst`.
struct CheckpointReader::Piece {
  uint64_t begin = 0, end = 0;
  char* dst = nullptr;
};

const at::Tensor& CheckpointReader::Chunk(const TensorRecord& t, const ChunkRecord& c) {
  const std::string id = c.file + ":" + c.name;
  auto it = chunk_cache_.find(id);
  if (it != chunk_cache_.end()) return it->second;
  at::Tensor data = EmptyHostStaging(c.numel, t.dtype);
  std::vector<Piece> whole = {{0, c.byte_end - c.byte_begin, static_cast<char*>(data.data_ptr())}};
  StreamChunk(t, c, whole);  // read and verified in one pass
  return chunk_cache_.emplace(id, data).first->second;
}

ChunkSpan ChunksCovering(const TensorRecord& t, int64_t begin, int64_t numel, size_t* hint) {
  if (numel <= 0) return {0, 0};
  const size_t n = t.chunks.size();
  const auto holds_begin = [&](size_t i) {
    return i < n && t.chunks[i].offset <= begin && begin < t.chunks[i].offset + t.chunks[i].numel;
  };
  size_t first = 0;
  if (hint && holds_begin(*hint)) {
    first = *hint;
  } else if (hint && holds_begin(*hint + 1)) {
    first = *hint + 1;
  } else {
    const auto ends_before = [&](const ChunkRecord& c) { return c.offset + c.numel <= begin; };
    first = static_cast<size_t>(
        std::partition_point(t.chunks.begin(), t.chunks.end(), ends_before) - t.chunks.begin());
  }
  size_t last = first;  // the chunks that start before the range ends: the ones read
  while (last < n && t.chunks[last].offset < begin + numel) ++last;
  if (hint) *hint = first;
  return {first, last};
}

void CheckpointReader::CheckRange(const TensorRecord& t, int64_t begin, int64_t numel) const {
  if (begin < 0 || numel < 0 || begin + numel > t.Numel())
    throw Error("checkpoint " + dir_ + ": range [" + std::to_string(begin) + ", " +
                std::to_string(begin + numel) + ") is outside tensor " + t.key + " (" +
                std::to_string(t.Numel()) + " elements)");
}

Error CheckpointReader::NoData(const std::string& key, int64_t from, int64_t to) const {
  return Error("checkpoint " + dir_ + ": tensor " + key + " has no data for elements " +
               std::to_string(from) + ".." + std::to_string(to));
}

at::Tensor CheckpointReader::ReadRange(const std::string& key, int64_t begin, int64_t numel) {
  const TensorRecord& t = Record(key);
  CheckRange(t, begin, numel);
  const int64_t end = begin + numel;
  const ChunkSpan span = ChunksCovering(t, begin, numel, &hint_);
  // One chunk holds the whole range (a same-DP load): its verified data.
  if (span.Size() == 1) {
    const ChunkRecord& c = t.chunks[span.first];
    if (c.offset <= begin && end <= c.offset + c.numel)
      return Chunk(t, c).narrow(0, begin - c.offset, numel);
  }
  at::Tensor out = at::empty({numel}, at::TensorOptions().dtype(t.dtype));
  int64_t covered = begin;
  for (size_t i = span.first; i < span.last; ++i) {
    const ChunkRecord& c = t.chunks[i];
    const int64_t lo = std::max(covered, c.offset), hi = std::min(end, c.offset + c.numel);
    if (lo >= hi) continue;
    if (lo != covered) break;  // a hole
    out.narrow(0, lo - begin, hi - lo).copy_(Chunk(t, c).narrow(0, lo - c.offset, hi - lo));
    covered = hi;
  }
  if (covered != end) throw NoData(key, covered, end);
  return out;
}

at::Tensor CheckpointReader::ReadFull(const std::string& key) {
  const TensorRecord& t = Record(key);
  return ReadRange(key, 0, t.Numel()).view(t.shape);
}

void CheckpointReader::VerifyAll() {
  for (const TensorRecord& t : meta_.tensors)
    for (const ChunkRecord& c : t.chunks) Chunk(t, c);
  chunk_cache_.clear();
}

namespace {

// A chunk's bytes pass through this when no range needs them (their
// checksum still covers them).
constexpr size_t kSkipBufferBytes = kWriteBlockBytes;

}  // namespace

void CheckpointReader::StreamChunk(const TensorRecord& t, const ChunkRecord& c,
                                   std::vector<Piece>& pieces) {
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  bool disjoint = true;
  for (size_t i = 1; i < pieces.size(); ++i) disjoint &= pieces[i].begin >= pieces[i - 1].end;
  const auto cached = chunk_cache_.find(c.file + ":" + c.name);
  if (!disjoint || cached != chunk_cache_.end()) {  // overlapping ranges: the whole chunk once
    const char* whole = static_cast<const char*>(Chunk(t, c).data_ptr());
    for (const Piece& p : pieces) std::memcpy(p.dst, whole + p.begin, p.end - p.begin);
    return;
  }
  const ReadOnlyFile& file = File(c.file, t.key);
  Xxh3Stream sum;
  const ByteObserver hash = [&sum](size_t, const void* p, size_t n) { sum.Update(p, n); };
  const auto read = [&](uint64_t from, uint64_t to, char* dst) {
    if (!file.ReadAt(c.byte_begin + from, to - from, dst, hash))
      throw Error(file.path() + ", tensor " + c.name + ": truncated (cannot read bytes " +
                  std::to_string(c.byte_begin) + ".." + std::to_string(c.byte_end) + ")");
  };
  const auto pass = [&](uint64_t from, uint64_t to) {  // bytes no range needs
    if (from < to && !skip_) skip_.reset(new char[kSkipBufferBytes]);
    for (uint64_t at = from; at < to; at += kSkipBufferBytes)
      read(at, std::min<uint64_t>(to, at + kSkipBufferBytes), skip_.get());
  };
  uint64_t at = 0;
  for (const Piece& p : pieces) {
    pass(at, p.begin);
    read(p.begin, p.end, p.dst);
    at = p.end;
  }
  pass(at, c.byte_end - c.byte_begin);
  const std::string got = sum.Hex();
  if (got != c.xxh3) throw ChecksumMismatch(t, c, got);
}

std::vector<at::Tensor> CheckpointReader::ReadRanges(const std::vector<Range>& ranges) {
  std::vector<at::Tensor> out;
  out.reserve(ranges.size());
  // Each chunk's pieces, by chunk (tensor, index): every check before any read.
  std::map<std::pair<const TensorRecord*, size_t>, std::vector<Piece>> by_chunk;
  for (const Range& r : ranges) {
    const TensorRecord& t = Record(r.key);
    CheckRange(t, r.begin, r.numel);
    out.push_back(EmptyHostStaging(r.numel, t.dtype));
    char* base = static_cast<char*>(out.back().data_ptr());
    const size_t esize = c10::elementSize(t.dtype);
    const int64_t end = r.begin + r.numel;
    int64_t covered = r.begin;
    const ChunkSpan span = ChunksCovering(t, r.begin, r.numel, &hint_);
    for (size_t i = span.first; i < span.last && covered < end; ++i) {
      const ChunkRecord& c = t.chunks[i];
      const int64_t lo = std::max(covered, c.offset), hi = std::min(end, c.offset + c.numel);
      if (lo >= hi) continue;
      if (lo != covered) break;  // a hole
      by_chunk[{&t, i}].push_back({static_cast<uint64_t>(lo - c.offset) * esize,
                                   static_cast<uint64_t>(hi - c.offset) * esize,
                                   base + static_cast<size_t>(lo - r.begin) * esize});
      covered = hi;
    }
    if (covered != end) throw NoData(r.key, covered, end);
  }
  // File order, so each file is read front to back.
  std::vector<std::pair<std::pair<const TensorRecord*, size_t>, std::vector<Piece>>> chunks(
      std::make_move_iterator(by_chunk.begin()), std::make_move_iterator(by_chunk.end()));
  const auto chunk_of = [](const auto& e) -> const ChunkRecord& {
    return e.first.first->chunks[e.first.second];
  };
  std::sort(chunks.begin(), chunks.end(), [&](const auto& a, const auto& b) {
    const ChunkRecord &x = chunk_of(a), &y = chunk_of(b);
    return std::tie(x.file, x.byte_begin) < std::tie(y.file, y.byte_begin);
  });
  for (auto& e : chunks) StreamChunk(*e.first.first, chunk_of(e), e.second);
  return out;
}

}  // namespace shardcheck
