#include "harness/cell/run_files.h"

#include <filesystem>

#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "spec/config_json.h"
#include "spec/schema.h"

namespace shardcheck {

nlohmann::ordered_json ModelJson(const ModelSpec& m) {
  nlohmann::ordered_json j;
  j["name"] = m.name;
  j["numel"] = m.Numel();
  j["params"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ParamInfo& p = m.params[i];
    j["params"].push_back({{"pid", i},
                           {"name", p.name},
                           {"shape", p.shape},
                           {"role", RoleName(p.role)},
                           {"wd_mult", p.DefaultWdMult()},
                           {"to_whole_param", !GoesToScalarOptimizer(p)}});
  }
  return j;
}

nlohmann::ordered_json RunConfigJson(const OracleRunOptions& opts, int64_t step) {
  nlohmann::ordered_json j;
  j["format"] = "shardcheck-run-config/1";
  j["optimizer"] = SetupJson(opts.setup);
  j["model"] = ModelJson(opts.model);
  j["dtype"] = DtypeName(opts.dtype);
  j["steps"] = opts.steps;
  j["step"] = step;
  j["seed"] = opts.seed;
  j["micro_batches"] = opts.micro_batches;
  return j;
}

void WriteFinalState(const std::string& path, const StateDict& sd) {
  std::vector<std::pair<std::string, at::Tensor>> tensors(sd.tensors.begin(), sd.tensors.end());
  WriteSafetensors(path, tensors,
                   {{"format", "shardcheck-final/1"},
                    {"optimizer", sd.optimizer},
                    {"step", std::to_string(sd.step)}});
}

void WriteJsonFile(const std::string& path, const nlohmann::ordered_json& j) {
  WriteFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace shardcheck
