#include "distributed/checkpoint_index.h"

#include <algorithm>
#include <unordered_map>

#include "spec/error.h"

namespace shardcheck {

nlohmann::json RankFileJson(const std::string& file, const FileRecord& f, uint64_t data_offset,
                            const std::vector<SafetensorsEntry>& entries,
                            const std::vector<WrittenChunk>& chunks) {
  std::unordered_map<std::string, const SafetensorsEntry*> by_name;
  by_name.reserve(entries.size());
  for (const SafetensorsEntry& e : entries) by_name.emplace(e.name, &e);
  nlohmann::json out = {
      {"file", file},
      {"record",
       {{"bytes", f.bytes}, {"header_bytes", f.header_bytes}, {"header_xxh3", f.header_xxh3}}},
      {"chunks", nlohmann::json::array()}};
  for (const WrittenChunk& c : chunks) {
    const auto e = by_name.find(c.key);
    if (e == by_name.end()) throw Error("written file " + file + " lacks " + c.key);
    out["chunks"].push_back(
        {{"key", c.key},
         {"dtype", SafetensorsDtype(c.dtype)},
         {"shape", c.shape},
         {"offset", c.offset},
         {"numel", c.numel},
         {"name", c.key},
         {"byte_range", {data_offset + e->second->begin, data_offset + e->second->end}},
         {"xxh3", c.xxh3}});
  }
  return out;
}

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
  const auto by_offset = [](const ChunkRecord& a, const ChunkRecord& b) {
    return a.offset < b.offset;
  };
  for (auto& [key, t] : m.tensors) {
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
