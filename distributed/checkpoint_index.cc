#include "distributed/checkpoint_index.h"

#include <simdjson.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "distributed/json_text.h"
#include "distributed/name_index.h"
#include "spec/error.h"

namespace shardcheck {

namespace {

// Chunk i's header entry: entries[i] when the header lists the chunks in
// their order (a save writes them so), else found by name.
class EntryOfChunk {
 public:
  EntryOfChunk(const std::vector<SafetensorsEntry>& entries, const std::vector<WrittenChunk>& chunks)
      : entries_(entries) {
    bool same_order = entries.size() == chunks.size();
    for (size_t i = 0; same_order && i < chunks.size(); ++i)
      same_order = entries[i].name == chunks[i].key;
    if (same_order) return;
    by_name_ = std::make_unique<NameIndex>(IndexEntryNames(entries));
  }

  // Null when the header has no entry for `c`.
  const SafetensorsEntry* operator()(size_t i, const WrittenChunk& c) const {
    if (!by_name_) return &entries_[i];
    const int64_t id = by_name_->Find(c.key);
    return id < 0 ? nullptr : &entries_[static_cast<size_t>(id)];
  }

 private:
  const std::vector<SafetensorsEntry>& entries_;
  std::unique_ptr<NameIndex> by_name_;
};

// An upper bound of RankFileText's length for names without escapes.
size_t RankFileTextBound(const std::string& file, const std::vector<WrittenChunk>& chunks) {
  constexpr size_t kFixed = 128, kNumber = 21;
  size_t n = file.size() + kFixed;
  for (const WrittenChunk& c : chunks)
    n += c.key.size() + c.xxh3.size() + kFixed + kNumber * (c.shape.size() + 4);
  return n;
}

}  // namespace

std::string RankFileText(const std::string& file, const FileRecord& f, uint64_t data_offset,
                         const std::vector<SafetensorsEntry>& entries,
                         const std::vector<WrittenChunk>& chunks) {
  const EntryOfChunk entry_of(entries, chunks);
  std::string out;
  out.reserve(RankFileTextBound(file, chunks));
  out += "{\"file\":";
  AppendJsonString(out, file);
  out += ",\"record\":{\"bytes\":";
  AppendJsonInteger(out, f.bytes);
  out += ",\"header_bytes\":";
  AppendJsonInteger(out, f.header_bytes);
  out += ",\"header_xxh3\":";
  AppendJsonString(out, f.header_xxh3);
  out += "},\"chunks\":[";
  for (size_t i = 0; i < chunks.size(); ++i) {
    const WrittenChunk& c = chunks[i];
    const SafetensorsEntry* e = entry_of(i, c);
    if (!e) throw Error("written file " + file + " lacks " + c.key);
    out += i ? ",{\"key\":" : "{\"key\":";
    AppendJsonString(out, c.key);
    out += ",\"dtype\":";
    AppendJsonString(out, SafetensorsDtype(c.dtype));
    out += ",\"shape\":[";
    for (size_t d = 0; d < c.shape.size(); ++d) {
      if (d) out += ',';
      AppendJsonInteger(out, c.shape[d]);
    }
    out += "],\"offset\":";
    AppendJsonInteger(out, c.offset);
    out += ",\"numel\":";
    AppendJsonInteger(out, c.numel);
    out += ",\"byte_range\":[";
    AppendJsonInteger(out, data_offset + e->begin);
    out += ',';
    AppendJsonInteger(out, data_offset + e->end);
    out += "],\"xxh3\":";
    AppendJsonString(out, c.xxh3);
    out += '}';
  }
  out += "]}";
  return out;
}

namespace {

// One field of a rank's file record, or Error naming the rank and field.
template <typename T>
T Field(simdjson::dom::element parent, const char* name, int rank) {
  T v;
  if (parent[name].get(v))
    throw Error("rank " + std::to_string(rank) + "'s file record: malformed field '" + name + "'");
  return v;
}

// The integers of an array field, or Error naming the rank and field.
template <typename Int>
std::vector<Int> Integers(simdjson::dom::element parent, const char* name, int rank) {
  std::vector<Int> out;
  for (simdjson::dom::element e : Field<simdjson::dom::array>(parent, name, rank)) {
    Int v;
    if (e.get(v))
      throw Error("rank " + std::to_string(rank) + "'s file record: malformed field '" + name + "'");
    out.push_back(v);
  }
  return out;
}

// Adds one rank's record (RankFileText) to `m`.
void AddRankFile(CheckpointMetadata& m, simdjson::dom::element j, int rank) {
  const std::string file(Field<std::string_view>(j, "file", rank));
  const simdjson::dom::element fr = Field<simdjson::dom::element>(j, "record", rank);
  m.files[file] = {Field<uint64_t>(fr, "bytes", rank), Field<uint64_t>(fr, "header_bytes", rank),
                   std::string(Field<std::string_view>(fr, "header_xxh3", rank))};
  for (simdjson::dom::element r : Field<simdjson::dom::array>(j, "chunks", rank)) {
    const std::string_view key = Field<std::string_view>(r, "key", rank);
    TensorRecord& t = m.tensors.FindOrAdd(key);
    if (t.chunks.empty()) {
      t.dtype = ParseSafetensorsDtype(std::string(Field<std::string_view>(r, "dtype", rank)));
      t.shape = Integers<int64_t>(r, "shape", rank);
    }
    const std::vector<uint64_t> br = Integers<uint64_t>(r, "byte_range", rank);
    if (br.size() != 2)
      throw Error("rank " + std::to_string(rank) + "'s file record: malformed field 'byte_range'");
    ChunkRecord c;
    c.offset = Field<int64_t>(r, "offset", rank);
    c.numel = Field<int64_t>(r, "numel", rank);
    c.file = file;
    c.name = t.key;
    c.byte_begin = br[0];
    c.byte_end = br[1];
    c.xxh3 = std::string(Field<std::string_view>(r, "xxh3", rank));
    t.chunks.push_back(std::move(c));
  }
}

}  // namespace

void AddRankFiles(CheckpointMetadata& m, const std::vector<std::string>& per_rank) {
  simdjson::dom::parser parser;
  for (size_t rank = 0; rank < per_rank.size(); ++rank) {
    const std::string& s = per_rank[rank];
    if (s.empty()) continue;
    simdjson::dom::element j;
    if (parser.parse(s).get(j))
      throw Error("rank " + std::to_string(rank) + "'s file record is not JSON");
    AddRankFile(m, j, static_cast<int>(rank));
  }
  const auto by_offset = [](const ChunkRecord& a, const ChunkRecord& b) {
    return a.offset < b.offset;
  };
  m.tensors.SortByKey();
  for (TensorRecord& t : m.tensors) {
    const std::string& key = t.key;
    // The ranks' chunks of a tensor usually arrive in offset order already
    // (rank by rank): then checking is linear where sorting is not.
    if (!std::is_sorted(t.chunks.begin(), t.chunks.end(), by_offset))
      std::sort(t.chunks.begin(), t.chunks.end(), by_offset);
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

BufferRecord LayoutRecord(const BufferLayout& layout, const std::vector<ParamInfo>& params,
                          c10::ScalarType model_dtype) {
  BufferRecord buf;
  buf.param_dtype = model_dtype;
  buf.grad_dtype = at::kFloat;
  buf.bucket_size = layout.bucket_size();
  for (const Bucket& b : layout.buckets()) {
    BucketRecord br;
    br.numel = b.world.size();
    br.numel_unpadded = b.numel_unpadded;
    for (int pi : b.params) {
      const PlacedParam& p = layout.params()[static_cast<size_t>(pi)];
      br.params.push_back(
          {params[static_cast<size_t>(p.param)].name, p.world.begin - b.world.begin, p.numel});
    }
    buf.buckets.push_back(std::move(br));
  }
  return buf;
}

std::map<std::string, std::string> RankFileTags(int rank) {
  return {{"format", kCheckpointFormatName}, {"rank", std::to_string(rank)}};
}

std::vector<std::string> BucketSizeKeys(c10::ScalarType model_dtype) {
  const std::string prefix = BufferPrefix(0, model_dtype, at::kFloat);
  return {prefix + ".per_bucket_numel", prefix + ".per_bucket_numel_unpadded"};
}

}  // namespace shardcheck
