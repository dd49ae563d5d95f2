#include "distributed/checkpoint_format.h"

#include <simdjson.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_set>

#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "distributed/sealed_json.h"
#include "distributed/tensor_index_text.h"
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

namespace {
std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::string Xxh3Hex(const void* data, size_t size) { return Hex64(XXH3_64bits(data, size)); }

std::string Xxh3Hex(const std::vector<at::Tensor>& parts) {
  Xxh3Stream sum;
  for (const at::Tensor& p : parts)
    sum.Update(p.data_ptr(), static_cast<size_t>(p.numel()) * p.element_size());
  return sum.Hex();
}

Xxh3Stream::Xxh3Stream() {
  XXH3_state_t* s = XXH3_createState();
  if (!s || XXH3_64bits_reset(s) != XXH_OK) {
    if (s) XXH3_freeState(s);
    throw Error("cannot start an XXH3 checksum", ErrorKind::kEnvironment);
  }
  state_ = std::shared_ptr<void>(s, [](void* p) { XXH3_freeState(static_cast<XXH3_state_t*>(p)); });
}

void Xxh3Stream::Update(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_.get()), data, size);
}

std::string Xxh3Stream::Hex() const {
  return Hex64(XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_.get())));
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
// keys come from a std::map or the tensor table, so they are new and in
// order. ordered_json's
// own insert searches its keys linearly, which made metadata.json's
// writing quadratic in its tensors (docs/performance.md, "Cost at scale").
void AppendNewKey(nlohmann::ordered_json& obj, const std::string& key, nlohmann::ordered_json value) {
  using Container = nlohmann::ordered_json::object_t::Container;
  static_cast<Container&>(obj.get_ref<nlohmann::ordered_json::object_t&>())
      .emplace_back(key, std::move(value));
}

}  // namespace

namespace {

// Every member of metadata.json but the last, `tensors`.
nlohmann::ordered_json JsonBeforeTensors(const CheckpointMetadata& m) {
  nlohmann::ordered_json j;
  j["format"] = kCheckpointFormatName;
  j["format_version"] = m.format_version;
  j["sharding_type"] = ShardingTypeName(m.sharding_type);
  j["optimizer"] = m.optimizer;
  j["optimizer_config"] = m.optimizer_config;
  j["schemas"] = m.schemas;
  j["step"] = m.step;
  auto schedule = LrScheduleJson(m.lr_schedule);
  schedule["max_lr"] = m.max_lr;
  j["lr_schedule"] = schedule;
  j["dp_size"] = m.dp_size;
  j["model_dtype"] = DtypeName(m.model_dtype);
  j["param_groups"] = nlohmann::ordered_json::array();
  for (const auto& g : m.groups)
    j["param_groups"].push_back({{"optimizer", g.optimizer},
                                 {"wd_mult", g.wd_mult},
                                 {"lr", g.lr},
                                 {"weight_decay", g.weight_decay},
                                 {"params", g.params}});
  j["params"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.params.size(); ++i)
    j["params"].push_back({{"name", m.params[i].name},
                           {"shape", m.params[i].shape},
                           {"role", RoleName(m.params[i].role)},
                           {"optimizer", m.param_child[i]}});
  auto& lay = j["layout"];
  lay["buffers"] = nlohmann::ordered_json::array();
  for (const auto& b : m.buffers) {
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
      for (const auto& p : bk.params)
        jk["params"].push_back({{"name", p.name}, {"offset", p.offset}, {"numel", p.numel}});
      jb["buckets"].push_back(jk);
    }
    lay["buffers"].push_back(jb);
  }
  lay["layer_wise_owner"] = m.layer_wise_owner;
  if (m.format_version >= 3) {
    j["files"] = nlohmann::ordered_json::object();
    for (const auto& [name, f] : m.files)
      AppendNewKey(j["files"], name,
                   {{"bytes", f.bytes},
                    {"header_bytes", f.header_bytes},
                    {"header_xxh3", f.header_xxh3}});
  }
  return j;
}

}  // namespace

nlohmann::ordered_json CheckpointMetadata::ToJson() const {
  nlohmann::ordered_json j = JsonBeforeTensors(*this);
  j["tensors"] = nlohmann::ordered_json::object();
  for (const TensorRecord& t : tensors) {
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
    AppendNewKey(j["tensors"], t.key, std::move(jt));
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

// metadata.json's `tensors` holds every chunk of every rank: hundreds of MB
// at thousands of ranks (docs/performance.md, "Cost at scale"). It is read
// from simdjson's DOM straight into TensorRecords; the other members (KBs)
// go through nlohmann and the readers above.

std::string JsonString(simdjson::dom::element e) { return std::string(std::string_view(e)); }

// The listed files' names (version 3), looked up once per chunk.
using FileNames = std::unordered_set<std::string_view>;

// One chunk of tensor t, checked against the tensor and the listed files.
ChunkRecord ReadChunk(simdjson::dom::element jc, const TensorRecord& t, const CheckpointMetadata& m,
                      const FileNames& files) {
  ChunkRecord c;
  c.offset = jc["offset"].get_int64();
  c.numel = jc["numel"].get_int64();
  c.file = JsonString(jc["file"]);
  c.name = JsonString(jc["name"]);
  const simdjson::dom::array br = jc["byte_range"].get_array();
  if (br.size() != 2) throw Error("byte_range must hold two numbers");
  c.byte_begin = br.at(0).get_uint64();
  c.byte_end = br.at(1).get_uint64();
  c.xxh3 = JsonString(jc["xxh3"]);
  CheckPlainFileName(c.file);
  if (m.format_version >= 3 && !files.count(c.file))
    throw Error("file '" + c.file + "' is not among the listed files");
  if (c.offset < 0 || c.numel <= 0 || c.offset > t.Numel() - c.numel)
    throw Error("chunk [" + std::to_string(c.offset) + ", +" + std::to_string(c.numel) +
                ") outside the tensor's " + std::to_string(t.Numel()) + " elements");
  if (c.byte_end < c.byte_begin ||
      c.byte_end - c.byte_begin != static_cast<uint64_t>(c.numel) * c10::elementSize(t.dtype))
    throw Error("chunk byte_range does not hold its elements");
  return c;
}

// One tensor's record: each chunk in offset order, never overlapping.
TensorRecord ReadTensor(const std::string& key, simdjson::dom::element jt,
                        const CheckpointMetadata& m, const FileNames& files) {
  TensorRecord t;
  t.key = key;
  t.dtype = ParseSafetensorsDtype(JsonString(jt["dtype"]));
  for (simdjson::dom::element d : jt["shape"].get_array()) t.shape.push_back(d.get_int64());
  CheckShape(t.shape);
  const simdjson::dom::array chunks = jt["chunks"].get_array();
  t.chunks.reserve(chunks.size());
  for (simdjson::dom::element jc : chunks) t.chunks.push_back(ReadChunk(jc, t, m, files));
  std::sort(t.chunks.begin(), t.chunks.end(),
            [](const ChunkRecord& a, const ChunkRecord& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < t.chunks.size(); ++i)
    if (t.chunks[i].offset < t.chunks[i - 1].offset + t.chunks[i - 1].numel)
      throw Error("chunks overlap at element " + std::to_string(t.chunks[i].offset));
  return t;
}

// The tensor index.
void ReadTensors(simdjson::dom::element j, CheckpointMetadata& m, std::string& field) {
  field = "tensors";
  FileNames files;
  for (const auto& [name, record] : m.files) files.insert(name);
  for (const simdjson::dom::key_value_pair kv : j.get_object()) {
    field = "tensors.";
    field.append(kv.key);
    if (!m.tensors.Add(ReadTensor(std::string(kv.key), kv.value, m, files)))
      throw Error("listed twice");
  }
  m.tensors.SortByKey();  // every writer lists them in key order: then a no-op
}

// Runs `read` with FromJson's error wrapping: "PATH: FIELD: what", or
// "PATH: malformed field 'FIELD': what" for a JSON type or key error.
void Wrapped(const std::string& path, std::string& field, const std::function<void()>& read) {
  try {
    read();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    throw Error(path + ": " + field + ": " + what);
  } catch (const std::exception& e) {
    throw Error(path + ": malformed field '" + field + "': " + e.what());
  }
}

// Every member but `tensors`, from `j` (an object).
CheckpointMetadata ReadAllButTensors(const nlohmann::json& j, const std::string& path,
                                     std::string& field) {
  CheckpointMetadata m;
  Wrapped(path, field, [&] {
    ReadHeader(j, path, m, field);
    ReadRun(j, m, field);
    ReadGroupsAndParams(j, m, field);
    ReadLayout(j, m, field);
    ReadFiles(j, m, field);
  });
  return m;
}

// `text` parsed by simdjson; throws Error naming `path`.
simdjson::dom::element ParseJson(simdjson::dom::parser& parser, const std::string& text,
                                 const std::string& path) {
  simdjson::dom::element doc;
  const simdjson::error_code e = parser.parse(simdjson::padded_string(text)).get(doc);
  if (e) throw Error(path + ": not valid JSON: " + simdjson::error_message(e));
  return doc;
}

}  // namespace

CheckpointMetadata CheckpointMetadata::FromJson(const nlohmann::json& j, const std::string& path) {
  std::string field;
  CheckpointMetadata m = ReadAllButTensors(j, path, field);
  simdjson::dom::parser parser;
  Wrapped(path, field, [&] {
    field = "tensors";
    ReadTensors(ParseJson(parser, j.at("tensors").dump(), path), m, field);
  });
  return m;
}

std::string MetadataFileText(const CheckpointMetadata& m) {
  // The members before `tensors` through nlohmann (kilobytes), the index
  // as text (distributed/tensor_index_text.h): the same bytes as
  // m.ToJson().dump(1).
  std::string body = JsonBeforeTensors(m).dump(1);  // "{\n ...\n}"
  body.reserve(body.size() + TensorIndexTextBound(m.tensors, 1) + 128);  // and the seal
  body.resize(body.size() - 2);
  body += ",\n \"tensors\": ";
  AppendTensorIndexText(m.tensors, 1, body);
  body += "\n}";
  return SealJson(std::move(body));
}

CheckpointMetadata ReadMetadataFile(const std::string& path) {
  return ParseMetadataText(ReadFile(path), path);
}

CheckpointMetadata ParseMetadataText(const std::string& text, const std::string& path) {
  const SealState seal = CheckSeal(text, path);
  simdjson::dom::parser parser;
  const simdjson::dom::element doc = ParseJson(parser, text, path);
  simdjson::dom::object members;
  if (doc.get_object().get(members)) throw Error(path + ": not a JSON object");
  // Every member but `tensors` through nlohmann (kilobytes), `tensors` from the DOM.
  nlohmann::json rest = nlohmann::json::object();
  for (const simdjson::dom::key_value_pair kv : members)
    if (kv.key != "tensors")
      rest[std::string(kv.key)] = nlohmann::json::parse(simdjson::minify(kv.value));
  std::string field;
  CheckpointMetadata m = ReadAllButTensors(rest, path, field);
  Wrapped(path, field, [&] {
    field = "tensors";
    ReadTensors(members["tensors"], m, field);
  });
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

}  // namespace shardcheck
