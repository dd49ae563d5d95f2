#include "harness/run_files.h"

#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "reference/schema.h"

namespace shardcheck {

nlohmann::ordered_json ConfigJson(const OptimizerConfig& c) {
  nlohmann::ordered_json j;
  j["kind"] = KindName(c.kind);
  j["lr"] = c.lr;
  j["weight_decay"] = c.weight_decay;
  if (c.kind == OptimizerKind::kMuon) {
    j["momentum"] = c.momentum;
    j["nesterov"] = c.nesterov;
    j["ns_steps"] = c.ns_steps;
    auto coeffs = nlohmann::ordered_json::array();
    for (int i = 0; i < c.ns_steps; ++i) {
      auto k = c.CoefficientsAt(i);
      coeffs.push_back({k[0], k[1], k[2]});
    }
    j["ns_coefficients"] = coeffs;
    j["scale"] = MuonScaleName(c.scale);
    j["extra_scale"] = c.extra_scale;
    j["ns_dtype"] = c.ns_bf16 ? "bf16" : "fp32";
  } else {
    j["beta1"] = c.beta1;
    j["beta2"] = c.beta2;
    if (c.kind != OptimizerKind::kLion) j["eps"] = c.eps;
  }
  j["schema"] = nlohmann::ordered_json::array();
  for (const auto& k : SchemaFor(c.kind).keys)
    j["schema"].push_back({{"key", k.name}, {"dtype", DtypeName(k.dtype)}});
  return j;
}

nlohmann::ordered_json SetupJson(const OptimizerSetup& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["max_grad_norm"] = s.max_grad_norm;
  j["children"] = nlohmann::ordered_json::array();
  auto main = ConfigJson(s.main);
  main["role"] = s.IsMuon() ? "muon" : "all";
  j["children"].push_back(main);
  if (s.scalar) {
    auto scalar = ConfigJson(*s.scalar);
    scalar["role"] = "scalar";
    j["children"].push_back(scalar);
  }
  return j;
}

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
                           {"muon", !IsMuonExcluded(p)}});
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
