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

// Writes `j` (pretty, trailing newline) to `path` atomically.
void WriteJsonFile(const std::string& path, const nlohmann::ordered_json& j);

}  // namespace shardcheck
