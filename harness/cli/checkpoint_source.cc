#include "harness/cli/checkpoint_source.h"

#include <filesystem>

#include "distributed/checkpoint.h"
#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "spec/error.h"
#include "spec/schema.h"

namespace shardcheck {

namespace fs = std::filesystem;

std::string ResolveCheckpointDir(const std::string& path) {
  const fs::path dir(path);
  if (!fs::is_directory(dir) || fs::exists(dir / kMetadataFile) ||
      !fs::is_regular_file(dir / "latest"))
    return path;
  std::string name = ReadFile((dir / "latest").string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
    name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos)
    throw Error((dir / "latest").string() + " does not name a checkpoint folder beside it");
  const fs::path named = dir / name;
  std::error_code ec;
  if (!fs::is_directory(named, ec))
    throw Error((dir / "latest").string() + " names '" + name + "', but " + named.string() +
                (fs::exists(named, ec) ? " is not a folder" : " does not exist") +
                " (was it removed or renamed after the save?)");
  return named.string();
}

std::string ModelSpaceSource::Describe() const {
  if (checkpoint) {
    const CheckpointMetadata& m = *checkpoint;
    return "checkpoint " + resolved + " (" + ShardingTypeName(m.sharding_type) + ", dp " +
           std::to_string(m.dp_size) + ", step " + std::to_string(m.step) + ", " + m.optimizer +
           ", " + DtypeName(m.model_dtype) + ")";
  }
  return "safetensors " + resolved + " (step " +
         (step ? std::to_string(*step) : std::string("unknown")) + ", " +
         (optimizer.empty() ? std::string("optimizer unknown") : optimizer) + ")";
}

namespace {

// Prefixes `e`'s message with `path` unless it already names it.
[[noreturn]] void Rethrow(const Error& e, const std::string& path) {
  const std::string what = e.what();
  if (what.find(path) != std::string::npos) throw e;
  throw Error(path + ": " + what);
}

ModelSpaceSource ReadFolder(const std::string& path) {
  ModelSpaceSource s;
  s.path = path;
  s.resolved = ResolveCheckpointDir(path);
  try {
    CheckpointReader reader(s.resolved);
    s.state = ReadModelSpace(reader);
    reader.VerifyAll();  // also the chunks ReadModelSpace does not need (per_bucket_numel)
    s.checkpoint = reader.metadata();
  } catch (const Error& e) {
    Rethrow(e, s.resolved);
  }
  s.step = s.state.step;
  s.optimizer = s.state.optimizer;
  return s;
}

ModelSpaceSource ReadStateFile(const std::string& path) {
  ModelSpaceSource s;
  s.path = path;
  s.resolved = path;
  std::map<std::string, std::string> meta;
  try {
    s.state.tensors = ReadSafetensors(path, &meta);
  } catch (const Error& e) {
    Rethrow(e, path);
  }
  auto format = meta.find("format");
  if (format != meta.end() && format->second == kCheckpointFormatName)
    throw Error(path +
                " is one rank's file of a checkpoint, not a model-space state: pass the "
                "checkpoint folder " +
                fs::path(path).parent_path().string());
  if (auto it = meta.find("step"); it != meta.end()) {
    try {
      size_t used = 0;
      s.step = std::stoll(it->second, &used);
      if (used != it->second.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      throw Error(path + ": metadata step '" + it->second + "' is not an integer");
    }
    s.state.step = *s.step;
  }
  if (auto it = meta.find("optimizer"); it != meta.end())
    s.optimizer = s.state.optimizer = it->second;
  return s;
}

}  // namespace

ModelSpaceSource ReadModelSpaceSource(const std::string& path) {
  if (fs::is_directory(path)) return ReadFolder(path);
  if (fs::is_regular_file(path)) return ReadStateFile(path);
  throw Error(path + " does not exist (expected a checkpoint folder or a .safetensors file)");
}

}  // namespace shardcheck
