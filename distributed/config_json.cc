#include "distributed/config_json.h"

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

}  // namespace shardcheck
