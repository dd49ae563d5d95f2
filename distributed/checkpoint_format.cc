#include "distributed/checkpoint_format.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "distributed/sealed_json.h"
#include "spec/error.h"
#include "spec/json_numbers.h"
#include "spec/schema.h"

namespace shardcheck {

namespace fs = std::filesystem;

std::string RankFileName(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "rank_%05d.safetensors", rank);
  return buf;
}

std::string TorchDtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
      return "torch.float32";
    case c10::kBFloat16:
      return "torch.bfloat16";
    case c10::kHalf:
      return "torch.float16";
    default:
      return "torch." + std::string(c10::toString(t));
  }
}

std::string BufferPrefix(int gbuf, c10::ScalarType pdt, c10::ScalarType gdt) {
  return "optimizer.distributed.dp_group_idx_0.gbuf_idx_" + std::to_string(gbuf) + ".dtype_(" +
         TorchDtypeName(pdt) + ", " + TorchDtypeName(gdt) + ")";
}

std::string DpReshardableKey(int gbuf, c10::ScalarType pdt, c10::ScalarType gdt, int bucket,
                             const std::string& kind) {
  return BufferPrefix(gbuf, pdt, gdt) + ".bucket_idx_" + std::to_string(bucket) + "." + kind;
}

std::string DpZeroKey(int gbuf, c10::ScalarType pdt, c10::ScalarType gdt, const std::string& kind) {
  return "optimizer.distributed.dp_group_idx_0.param_state.gbuf_idx_" + std::to_string(gbuf) +
         ".dtype_(" + TorchDtypeName(pdt) + ", " + TorchDtypeName(gdt) + ")." + kind;
}

std::string ModelSpaceKey(const std::string& kind, const std::string& param) {
  return "optimizer.state." + kind + "." + param;
}

int64_t TensorRecord::Numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::string Xxh3Hex(const void* data, size_t size) { return Hex64(XXH3_64bits(data, size)); }

std::string Xxh3Hex(const std::vector<at::Tensor>& parts) {
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(),
                                                                        &XXH3_freeState);
  if (!state || XXH3_64bits_reset(state.get()) != XXH_OK)
    throw Error("cannot start an XXH3 checksum", ErrorKind::kEnvironment);
  for (const at::Tensor& p : parts)
    XXH3_64bits_update(state.get(), p.data_ptr(),
                       static_cast<size_t>(p.numel()) * p.element_size());
  return Hex64(XXH3_64bits_digest(state.get()));
}

namespace {

// Non-negative dimensions whose product stays far from overflowing.
const std::vector<int64_t>& CheckShape(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("negative dimension " + std::to_string(d));
    if (d != 0 && numel > (int64_t{1} << 50) / d) throw Error("shape holds over 2^50 elements");
    numel *= d;
  }
  return shape;
}

void CheckPlainFileName(const std::string& name) {
  if (name.find('/') != std::string::npos || name.empty() || name[0] == '.' ||
      name == kMetadataFile)
    throw Error("file '" + name + "' is not a plain file name");
}

}  // namespace

const ParamInfo* CheckpointMetadata::FindParam(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

// Appends `key` to the object `obj` without looking for it: the callers'
// keys come from a std::map, so they are new and in order. ordered_json's
// own insert searches its keys linearly, which made metadata.json's
// writing quadratic in its tensors (docs/performance.md, "Cost at scale").
void AppendNewKey(nlohmann::ordered_json& obj, const std::string& key, nlohmann::ordered_json value) {
  using Container = nlohmann::ordered_json::object_t::Container;
  static_cast<Container&>(obj.get_ref<nlohmann::ordered_json::object_t&>())
      .emplace_back(key, std::move(value));
}

}  // namespace

nlohmann::ordered_json CheckpointMetadata::ToJson() const {
  nlohmann::ordered_json j;
  j["format"] = kCheckpointFormatName;
  j["format_version"] = format_version;
  j["sharding_type"] = ShardingTypeName(sharding_type);
  j["optimizer"] = optimizer;
  j["optimizer_config"] = optimizer_config;
  j["schemas"] = schemas;
  j["step"] = step;
  auto schedule = LrScheduleJson(lr_schedule);
  schedule["max_lr"] = max_lr;
  j["lr_schedule"] = schedule;
  j["dp_size"] = dp_size;
  j["model_dtype"] = DtypeName(model_dtype);
  j["param_groups"] = nlohmann::ordered_json::array();
  for (const auto& g : groups)
    j["param_groups"].push_back({{"optimizer", g.optimizer},
                                 {"wd_mult", g.wd_mult},
                                 {"lr", g.lr},
                                 {"weight_decay", g.weight_decay},
                                 {"params", g.params}});
  j["params"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < params.size(); ++i)
    j["params"].push_back({{"name", params[i].name},
                           {"shape", params[i].shape},
                           {"role", RoleName(params[i].role)},
                           {"optimizer", param_child[i]}});
  auto& lay = j["layout"];
  lay["buffers"] = nlohmann::ordered_json::array();
  for (const auto& b : buffers) {
    nlohmann::ordered_json jb;
    jb["param_dtype"] = DtypeName(b.param_dtype);
    jb["grad_dtype"] = DtypeName(b.grad_dtype);
    jb["bucket_size"] = b.bucket_size;
    jb["buckets"] = nlohmann::ordered_json::array();
    for (const auto& bk : b.buckets) {
      nlohmann::ordered_json jk;
      jk["numel"] = bk.numel;
      jk["numel_unpadded"] = bk.numel_unpadded;
      jk["params"] = nlohmann::ordered_json::array();
      for (const auto& m : bk.params)
        jk["params"].push_back({{"name", m.name}, {"offset", m.offset}, {"numel", m.numel}});
      jb["buckets"].push_back(jk);
    }
    lay["buffers"].push_back(jb);
  }
  lay["layer_wise_owner"] = layer_wise_owner;
  if (format_version >= 3) {
    j["files"] = nlohmann::ordered_json::object();
    for (const auto& [name, f] : files)
      AppendNewKey(j["files"], name,
                   {{"bytes", f.bytes},
                    {"header_bytes", f.header_bytes},
                    {"header_xxh3", f.header_xxh3}});
  }
  j["tensors"] = nlohmann::ordered_json::object();
  for (const auto& [key, t] : tensors) {
    nlohmann::ordered_json jt;
    jt["dtype"] = SafetensorsDtype(t.dtype);
    jt["shape"] = t.shape;
    jt["chunks"] = nlohmann::ordered_json::array();
    for (const auto& c : t.chunks)
      jt["chunks"].push_back({{"offset", c.offset},
                              {"numel", c.numel},
                              {"file", c.file},
                              {"name", c.name},
                              {"byte_range", {c.byte_begin, c.byte_end}},
                              {"xxh3", c.xxh3}});
    AppendNewKey(j["tensors"], key, std::move(jt));
  }
  return j;
}

namespace {

// The steps of CheckpointMetadata::FromJson, in the order of metadata.json's
// fields. Each sets `field` to the field it reads, for the error message.

void ReadHeader(const nlohmann::json& j, const std::string& path, CheckpointMetadata& m,
                std::string& field) {
  field = "format";
  if (j.at("format").get<std::string>() != kCheckpointFormatName)
    throw Error(path + ": not a shardcheck checkpoint (format '" +
                j.at("format").get<std::string>() + "')");
  field = "format_version";
  m.format_version = JsonInteger<int>(j.at("format_version"));
  if (m.format_version < kOldestReadableFormatVersion ||
      m.format_version > kCheckpointFormatVersion)
    throw Error(path + ": unknown format version " + std::to_string(m.format_version) +
                " (this shardcheck reads versions " +
                std::to_string(kOldestReadableFormatVersion) + " to " +
                std::to_string(kCheckpointFormatVersion) + ")");
  field = "sharding_type";
  m.sharding_type = ParseShardingType(j.at("sharding_type").get<std::string>());
}

void ReadRun(const nlohmann::json& j, CheckpointMetadata& m, std::string& field) {
  field = "optimizer";
  m.optimizer = j.at("optimizer").get<std::string>();
  m.optimizer_config = j.at("optimizer_config");
  field = "schemas";
  m.schemas = j.at("schemas").get<std::map<std::string, std::vector<std::string>>>();
  field = "step";
  m.step = JsonInteger<int64_t>(j.at("step"));
  field = "lr_schedule";
  if (m.format_version >= 2) {
    m.lr_schedule = LrScheduleFromJson(j.at("lr_schedule"));
    m.max_lr = j.at("lr_schedule").at("max_lr").get<double>();
  } else {
    // Version 1 knew no schedule: constant at the first child's lr.
    m.max_lr = j.at("optimizer_config").at("children").at(0).at("lr").get<double>();
  }
  field = "dp_size";
  m.dp_size = JsonInteger<int>(j.at("dp_size"));
  field = "model_dtype";
  m.model_dtype = ParseDtype(j.at("model_dtype").get<std::string>());
}

void ReadGroupsAndParams(const nlohmann::json& j, CheckpointMetadata& m, std::string& field) {
  field = "param_groups";
  for (const auto& g : j.at("param_groups"))
    m.groups.push_back({g.at("optimizer").get<std::string>(), g.at("wd_mult").get<double>(),
                        g.at("lr").get<double>(), g.at("weight_decay").get<double>(),
                        g.at("params").get<std::vector<std::string>>()});
  field = "params";
  for (const auto& p : j.at("params")) {
    m.params.push_back({p.at("name").get<std::string>(),
                        CheckShape(JsonIntegers<int64_t>(p.at("shape"))),
                        ParseRole(p.at("role").get<std::string>())});
    m.param_child.push_back(p.at("optimizer").get<std::string>());
  }
}

BucketRecord ReadBucket(const nlohmann::json& jk) {
  BucketRecord bk;
  bk.numel = JsonInteger<int64_t>(jk.at("numel"));
  bk.numel_unpadded = JsonInteger<int64_t>(jk.at("numel_unpadded"));
  for (const auto& jm : jk.at("params"))
    bk.params.push_back({jm.at("name").get<std::string>(), JsonInteger<int64_t>(jm.at("offset")),
                         JsonInteger<int64_t>(jm.at("numel"))});
  return bk;
}

void ReadLayout(const nlohmann::json& j, CheckpointMetadata& m, std::string& field) {
  field = "layout";
  for (const auto& jb : j.at("layout").at("buffers")) {
    BufferRecord b;
    b.param_dtype = ParseDtype(jb.at("param_dtype").get<std::string>());
    b.grad_dtype = ParseDtype(jb.at("grad_dtype").get<std::string>());
    b.bucket_size = JsonInteger<int64_t>(jb.at("bucket_size"));
    for (const auto& jk : jb.at("buckets")) b.buckets.push_back(ReadBucket(jk));
    m.buffers.push_back(std::move(b));
  }
  for (const auto& [name, owner] : j.at("layout").at("layer_wise_owner").items())
    m.layer_wise_owner[name] = JsonInteger<int>(owner);
}

// Version 3's file records (older versions have none).
void ReadFiles(const nlohmann::json& j, CheckpointMetadata& m, std::string& field) {
  if (m.format_version < 3) return;
  field = "files";
  for (auto it = j.at("files").begin(); it != j.at("files").end(); ++it) {
    field = "files." + it.key();
    CheckPlainFileName(it.key());
    const FileRecord f{JsonInteger<uint64_t>(it->at("bytes")),
                       JsonInteger<uint64_t>(it->at("header_bytes")),
                       it->at("header_xxh3").get<std::string>()};
    if (f.header_bytes < 8 || f.header_bytes > f.bytes || f.header_bytes > (100ull << 20))
      throw Error("header_bytes " + std::to_string(f.header_bytes) + " impossible for a " +
                  std::to_string(f.bytes) + "-byte file");
    m.files[it.key()] = f;
  }
}

// One chunk of tensor t, checked against the tensor and the listed files.
ChunkRecord ReadChunk(const nlohmann::json& jc, const TensorRecord& t, const CheckpointMetadata& m) {
  ChunkRecord c;
  c.offset = JsonInteger<int64_t>(jc.at("offset"));
  c.numel = JsonInteger<int64_t>(jc.at("numel"));
  c.file = jc.at("file").get<std::string>();
  c.name = jc.at("name").get<std::string>();
  auto br = JsonIntegers<uint64_t>(jc.at("byte_range"));
  if (br.size() != 2) throw Error("byte_range must hold two numbers");
  c.byte_begin = br[0];
  c.byte_end = br[1];
  c.xxh3 = jc.at("xxh3").get<std::string>();
  CheckPlainFileName(c.file);
  if (m.format_version >= 3 && !m.files.count(c.file))
    throw Error("file '" + c.file + "' is not among the listed files");
  if (c.offset < 0 || c.numel <= 0 || c.offset > t.Numel() - c.numel)
    throw Error("chunk [" + std::to_string(c.offset) + ", +" + std::to_string(c.numel) +
                ") outside the tensor's " + std::to_string(t.Numel()) + " elements");
  if (c.byte_end - c.byte_begin != static_cast<uint64_t>(c.numel) * c10::elementSize(t.dtype))
    throw Error("chunk byte_range does not hold its elements");
  return c;
}

// The tensor index: each tensor's chunks in offset order, never overlapping.
void ReadTensors(const nlohmann::json& j, CheckpointMetadata& m, std::string& field) {
  field = "tensors";
  for (auto it = j.at("tensors").begin(); it != j.at("tensors").end(); ++it) {
    field = "tensors." + it.key();
    TensorRecord t;
    t.key = it.key();
    t.dtype = ParseSafetensorsDtype(it->at("dtype").get<std::string>());
    t.shape = JsonIntegers<int64_t>(it->at("shape"));
    CheckShape(t.shape);
    for (const auto& jc : it->at("chunks")) t.chunks.push_back(ReadChunk(jc, t, m));
    std::sort(t.chunks.begin(), t.chunks.end(),
              [](const ChunkRecord& a, const ChunkRecord& b) { return a.offset < b.offset; });
    for (size_t i = 1; i < t.chunks.size(); ++i)
      if (t.chunks[i].offset < t.chunks[i - 1].offset + t.chunks[i - 1].numel)
        throw Error("chunks overlap at element " + std::to_string(t.chunks[i].offset));
    m.tensors[t.key] = std::move(t);
  }
}

}  // namespace

CheckpointMetadata CheckpointMetadata::FromJson(const nlohmann::json& j, const std::string& path) {
  CheckpointMetadata m;
  std::string field;
  try {
    ReadHeader(j, path, m, field);
    ReadRun(j, m, field);
    ReadGroupsAndParams(j, m, field);
    ReadLayout(j, m, field);
    ReadFiles(j, m, field);
    ReadTensors(j, m, field);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    throw Error(path + ": " + field + ": " + what);
  } catch (const std::exception& e) {
    throw Error(path + ": malformed field '" + field + "': " + e.what());
  }
  return m;
}

std::string MetadataFileText(const CheckpointMetadata& m) { return SealJson(m.ToJson().dump(1)); }

CheckpointMetadata ReadMetadataFile(const std::string& path) {
  return ParseMetadataText(ReadFile(path), path);
}

CheckpointMetadata ParseMetadataText(const std::string& text, const std::string& path) {
  const SealState seal = CheckSeal(text, path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  CheckpointMetadata m = CheckpointMetadata::FromJson(j, path);
  if (m.format_version >= 3 && seal == SealState::kAbsent)
    throw Error(path + ": format version " + std::to_string(m.format_version) + " needs its " +
                kSealMember + " checksum as the last member, and it is missing or damaged");
  return m;
}

FileRecord RecordFile(const std::string& path) {
  const SafetensorsFile header = ReadSafetensorsHeader(path);
  FileRecord f;
  f.bytes = fs::file_size(path);
  f.header_bytes = header.DataOffset();
  const std::string prefix = ReadFilePrefix(path, f.header_bytes);
  f.header_xxh3 = Xxh3Hex(prefix.data(), prefix.size());
  return f;
}

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
  index_ = TensorIndex(meta_);
  if (meta_.format_version >= 3) CheckListedFiles(dir, meta_);
  // Every file: present, a safetensors file, holding the named tensors at the indexed bytes.
  std::map<std::string, SafetensorsFile> files;
  for (const auto& [key, t] : meta_.tensors) {
    for (const ChunkRecord& c : t.chunks) {
      const std::string path = (fs::path(dir) / c.file).string();
      auto it = files.find(c.file);
      if (it == files.end()) {
        if (!fs::exists(path))
          throw Error("checkpoint " + dir + ": file " + c.file + " is missing (tensor " + key +
                      ")");
        it = files.emplace(c.file, ReadSafetensorsHeader(path)).first;
      }
      const SafetensorsFile& f = it->second;
      const SafetensorsEntry* e = nullptr;
      for (const auto& entry : f.entries)
        if (entry.name == c.name) e = &entry;
      if (!e) throw Error(path + " lacks tensor " + c.name + " (indexed for " + key + ")");
      if (f.DataOffset() + e->begin != c.byte_begin || f.DataOffset() + e->end != c.byte_end ||
          e->dtype != t.dtype)
        throw Error(path + ", tensor " + c.name + ": header disagrees with " + kMetadataFile +
                    " (byte range or dtype)");
    }
  }
}

const TensorRecord& CheckpointReader::Record(const std::string& key) const {
  const TensorRecord* t = index_.Find(key);
  if (!t) throw Error("checkpoint " + dir_ + " has no tensor " + key);
  return *t;
}

const at::Tensor& CheckpointReader::Chunk(const TensorRecord& t, const ChunkRecord& c) {
  const std::string id = c.file + ":" + c.name;
  auto it = chunk_cache_.find(id);
  if (it != chunk_cache_.end()) return it->second;
  const std::string path = (fs::path(dir_) / c.file).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + " (tensor " + t.key + ")");
  at::Tensor data = at::empty({c.numel}, at::TensorOptions().dtype(t.dtype));
  in.seekg(static_cast<std::streamoff>(c.byte_begin));
  in.read(static_cast<char*>(data.data_ptr()),
          static_cast<std::streamsize>(c.byte_end - c.byte_begin));
  if (!in)
    throw Error(path + ", tensor " + c.name + ": truncated (cannot read bytes " +
                std::to_string(c.byte_begin) + ".." + std::to_string(c.byte_end) + ")");
  const std::string sum = Xxh3Hex(data.data_ptr(), c.byte_end - c.byte_begin);
  if (sum != c.xxh3)
    throw Error("checksum mismatch in " + c.file + ", tensor " + t.key + " (elements " +
                std::to_string(c.offset) + ".." + std::to_string(c.offset + c.numel) + "): xxh3 " +
                sum + ", expected " + c.xxh3);
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

TensorIndex::TensorIndex(const CheckpointMetadata& m) {
  by_key_.reserve(m.tensors.size());
  for (const auto& [key, t] : m.tensors) by_key_.emplace(key, &t);
}

const TensorRecord* TensorIndex::Find(const std::string& key) const {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

at::Tensor CheckpointReader::ReadRange(const std::string& key, int64_t begin, int64_t numel) {
  const TensorRecord& t = Record(key);
  if (begin < 0 || numel < 0 || begin + numel > t.Numel())
    throw Error("checkpoint " + dir_ + ": range [" + std::to_string(begin) + ", " +
                std::to_string(begin + numel) + ") is outside tensor " + key + " (" +
                std::to_string(t.Numel()) + " elements)");
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
  if (covered != end)
    throw Error("checkpoint " + dir_ + ": tensor " + key + " has no data for elements " +
                std::to_string(covered) + ".." + std::to_string(end));
  return out;
}

at::Tensor CheckpointReader::ReadFull(const std::string& key) {
  const TensorRecord& t = Record(key);
  return ReadRange(key, 0, t.Numel()).view(t.shape);
}

void CheckpointReader::VerifyAll() {
  for (const auto& [key, t] : meta_.tensors)
    for (const ChunkRecord& c : t.chunks) Chunk(t, c);
  chunk_cache_.clear();
}

}  // namespace shardcheck
