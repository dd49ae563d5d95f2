#include "distributed/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "distributed/file_util.h"
#include "distributed/json_text.h"
#include "distributed/name_index.h"
#include "spec/error.h"
#include "spec/json_numbers.h"

namespace shardcheck {

namespace {

struct DtypeName {
  c10::ScalarType dtype;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {c10::kFloat, "F32"}, {c10::kBFloat16, "BF16"}, {c10::kHalf, "F16"},  {c10::kDouble, "F64"},
    {c10::kLong, "I64"},  {c10::kInt, "I32"},       {c10::kShort, "I16"}, {c10::kChar, "I8"},
    {c10::kByte, "U8"},   {c10::kBool, "BOOL"},
};

// An upper bound of a header's length without its metadata, for names
// without escapes (a longer text still grows as a string does): reserving
// it keeps a header of 100k entries from being copied as it doubles.
size_t HeaderTextBound(const std::vector<SafetensorsSpec>& tensors) {
  // "name":{"dtype":"BOOL","shape":[...],"data_offsets":[a,b]}, and a
  // comma; each number at most 20 digits.
  constexpr size_t kFixed = 64, kNumber = 21;
  size_t n = 64;
  for (const SafetensorsSpec& t : tensors)
    n += t.name.size() + kFixed + kNumber * (t.shape.size() + 2);
  return n;
}

}  // namespace

std::string SafetensorsDtype(c10::ScalarType dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  throw Error(std::string("safetensors cannot hold dtype ") + c10::toString(dtype));
}

c10::ScalarType ParseSafetensorsDtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  throw Error("unknown safetensors dtype '" + name + "'");
}

SafetensorsLayout LayOutSafetensors(const std::string& path,
                                    const std::vector<SafetensorsSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  // The header is written in the order given, as nlohmann's compact dump
  // would write it; built as text (distributed/json_text.h) because a JSON
  // tree per entry cost more than linear time in the allocator at 100k
  // tensors, and ordered_json's inserts search their keys linearly.
  SafetensorsLayout out;
  out.entries.reserve(tensors.size());
  out.json.reserve(HeaderTextBound(tensors));
  out.json = "{";
  if (!metadata.empty()) out.json += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  NameIndex names(tensors.size());
  uint64_t offset = 0;
  for (const SafetensorsSpec& t : tensors) {
    if (t.name == "__metadata__") throw Error(path + ": '__metadata__' is not a tensor name");
    if (!names.Add(t.name)) throw Error(path + ": duplicate tensor " + t.name);
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const uint64_t bytes = static_cast<uint64_t>(numel) * c10::elementSize(t.dtype);
    if (out.json.size() > 1) out.json += ',';
    AppendJsonString(out.json, t.name);
    out.json += ":{\"dtype\":";
    AppendJsonString(out.json, SafetensorsDtype(t.dtype));
    out.json += ",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d) out.json += ',';
      AppendJsonInteger(out.json, t.shape[d]);
    }
    out.json += "],\"data_offsets\":[";
    AppendJsonInteger(out.json, offset);
    out.json += ',';
    AppendJsonInteger(out.json, offset + bytes);
    out.json += "]}";
    out.entries.push_back({t.name, t.dtype, t.shape, offset, offset + bytes});
    offset += bytes;
  }
  out.json += '}';
  out.json.append((8 - out.json.size() % 8) % 8, ' ');
  return out;
}

uint64_t WriteSafetensorsParts(const std::string& path,
                               const std::vector<SafetensorsParts>& tensors,
                               const std::map<std::string, std::string>& metadata,
                               const std::function<void()>& midway,
                               const TensorBytesObserver& observe) {
  std::vector<SafetensorsSpec> specs;
  std::vector<ByteRun> data;
  std::vector<size_t> tensor_of_run;  // data's run i + 1 (after the header) -> tensor
  specs.reserve(tensors.size());
  for (const SafetensorsParts& t : tensors) {
    if (t.parts.empty()) throw Error(path + ": tensor " + t.name + " has no data");
    const c10::ScalarType dtype = t.parts[0].scalar_type();
    int64_t numel = 0, expected = 1;
    for (const at::Tensor& part : t.parts) {
      if (part.scalar_type() != dtype || !part.is_contiguous() || !part.device().is_cpu())
        throw Error(path + ": tensor " + t.name + " has a part that is not contiguous CPU " +
                    SafetensorsDtype(dtype));
      numel += part.numel();
      data.push_back({part.data_ptr(), static_cast<size_t>(part.numel()) * part.element_size()});
      tensor_of_run.push_back(specs.size());
    }
    for (int64_t d : t.shape) expected *= d;
    if (numel != expected)
      throw Error(path + ": tensor " + t.name + " has " + std::to_string(numel) +
                  " elements in its parts, " + std::to_string(expected) + " in its shape");
    specs.push_back({t.name, dtype, t.shape});
  }
  const SafetensorsLayout layout = LayOutSafetensors(path, specs, metadata);
  const uint64_t n = layout.json.size();
  std::string head;
  for (int i = 0; i < 8; ++i) head.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  head += layout.json;
  // The tensors' bytes go to the file from their own memory.
  data.insert(data.begin(), ByteRun{head.data(), head.size()});
  ByteObserver by_run;
  if (observe)
    by_run = [&](size_t run, const void* bytes, size_t size) {
      if (run > 0) observe(tensor_of_run[run - 1], bytes, size);
    };
  WriteFileAtomic(path, data, midway, by_run);
  return n;
}

uint64_t WriteSafetensors(const std::string& path,
                          const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                          const std::map<std::string, std::string>& metadata,
                          const std::function<void()>& midway) {
  std::vector<SafetensorsParts> parts;
  for (const auto& [name, t] : tensors) parts.push_back({name, t.sizes().vec(), {t.contiguous()}});
  return WriteSafetensorsParts(path, parts, metadata, midway);
}

namespace {

void CheckHeaderLength(const std::string& path, uint64_t n, uint64_t file_size) {
  if (file_size < 8)
    throw Error(path + ": truncated (" + std::to_string(file_size) + " bytes, no header)");
  if (n > file_size - 8 || n > (100ull << 20))
    throw Error(path + ": header length " + std::to_string(n) + " exceeds the file (" +
                std::to_string(file_size) + " bytes): truncated or not safetensors");
}

}  // namespace

SafetensorsFile ReadSafetensorsHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("cannot open " + path);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  if (file_size < 8)
    throw Error(path + ": truncated (" + std::to_string(file_size) + " bytes, no header)");
  in.seekg(0);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  CheckHeaderLength(path, n, file_size);
  std::string json(n, '\0');
  in.read(json.data(), static_cast<std::streamsize>(n));
  if (!in) throw Error(path + ": cannot read the header");
  return ParseSafetensorsHeader(path, json, file_size);
}

SafetensorsFile ParseSafetensorsHeader(const std::string& path, const std::string& json,
                                       uint64_t file_size) {
  const uint64_t n = json.size();
  CheckHeaderLength(path, n, file_size);
  SafetensorsFile f;
  f.path = path;
  f.header_size = n;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(json);
  } catch (const std::exception& e) {
    throw Error(path + ": header is not valid JSON: " + e.what());
  }
  if (!h.is_object()) throw Error(path + ": header is not a JSON object");
  const uint64_t data_size = file_size - 8 - n;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw Error(path + ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw Error(path + ": __metadata__." + m.key() + " is not a string");
        f.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string where = path + ", tensor " + it.key();
    SafetensorsEntry e;
    e.name = it.key();
    try {
      e.dtype = ParseSafetensorsDtype(it->at("dtype").get<std::string>());
      e.shape = JsonIntegers<int64_t>(it->at("shape"));
      auto off = JsonIntegers<uint64_t>(it->at("data_offsets"));
      if (off.size() != 2) throw Error("data_offsets must hold two numbers");
      e.begin = off[0];
      e.end = off[1];
    } catch (const Error& err) {
      throw Error(where + ": " + err.what());
    } catch (const std::exception& err) {
      throw Error(where + ": malformed entry: " + err.what());
    }
    uint64_t numel = 1;
    for (int64_t d : e.shape) {
      if (d < 0) throw Error(where + ": negative dimension");
      if (d != 0 && numel > data_size / static_cast<uint64_t>(d))
        throw Error(where + ": shape holds more elements than the file has bytes");
      numel *= static_cast<uint64_t>(d);
    }
    const uint64_t want = numel * c10::elementSize(e.dtype);
    if (e.end < e.begin || e.end - e.begin != want)
      throw Error(where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                  std::to_string(e.end) + ") do not hold " + std::to_string(want) + " bytes");
    if (e.end > data_size)
      throw Error(where + ": data ends at byte " + std::to_string(e.end) + " of a " +
                  std::to_string(data_size) + "-byte data section: file truncated");
    f.entries.push_back(std::move(e));
  }
  std::sort(f.entries.begin(), f.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  uint64_t expect = 0;
  for (const auto& e : f.entries) {
    if (e.begin != expect && e.end != e.begin)
      throw Error(path + ", tensor " + e.name + ": data starts at " + std::to_string(e.begin) +
                  ", expected " + std::to_string(expect) + " (overlap or hole)");
    expect = std::max(expect, e.end);
  }
  if (expect != data_size)
    throw Error(path + ": " + std::to_string(data_size - expect) +
                " bytes after the last tensor (not indexed by the header)");
  return f;
}

std::map<std::string, at::Tensor> ReadSafetensors(const std::string& path,
                                                  std::map<std::string, std::string>* metadata) {
  SafetensorsFile f = ReadSafetensorsHeader(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  std::map<std::string, at::Tensor> out;
  for (const auto& e : f.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    in.seekg(static_cast<std::streamoff>(f.DataOffset() + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) throw Error(path + ", tensor " + e.name + ": cannot read its data");
    out[e.name] = t;
  }
  if (metadata) *metadata = f.metadata;
  return out;
}

NameIndex IndexEntryNames(const std::vector<SafetensorsEntry>& entries) {
  NameIndex index(entries.size());
  for (const SafetensorsEntry& e : entries) index.Add(e.name);
  return index;
}

}  // namespace shardcheck
