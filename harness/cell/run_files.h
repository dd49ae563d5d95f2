// Files a run leaves behind: final.safetensors (model-space state) and
// config.json (the fully resolved run).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/cell/oracle_run.h"
#include "spec/config.h"
#include "spec/config_json.h"
#include "spec/state_dict.h"
#include "testing/model_spec.h"

namespace shardcheck {

nlohmann::ordered_json ModelJson(const ModelSpec& m);
// The resolved run: model, setup, steps, seed, dtype, M, step reached.
nlohmann::ordered_json RunConfigJson(const OracleRunOptions& opts, int64_t step);

// final.safetensors: the state dict's tensors sorted by key ("param.<n>",
// "main_param.<n>" for non-fp32 models, "state.<key>.<n>"), with metadata
// {format, optimizer, step}. Atomic; throws Error.
void WriteFinalState(const std::string& path, const StateDict& sd);

// An output folder made for one command: created at once (with its
// parents); unless Keep() is called, the destructor removes it again when
// this object created it, so a failed run leaves no empty or half-filled
// --out behind. A folder that existed before is never removed.
class OutputDir {
 public:
  explicit OutputDir(const std::string& path);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool created_ = false;
  bool keep_ = false;
};

// Writes `j` (pretty, trailing newline) to `path` atomically.
void WriteJsonFile(const std::string& path, const nlohmann::ordered_json& j);

}  // namespace shardcheck
