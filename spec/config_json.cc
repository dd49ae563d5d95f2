#include "spec/config_json.h"

namespace shardcheck {

nlohmann::ordered_json SchemaJson(const StateSchema& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& k : s.keys) j.push_back({{"key", k.name}, {"dtype", DtypeName(k.dtype)}});
  return j;
}

nlohmann::ordered_json ConfigJson(const OptimizerConfig& c) {
  nlohmann::ordered_json j;
  j["kind"] = c.kind();
  for (const auto& h : c.spec().hyperparams) j[h.name] = HyperValueJson(c.values().at(h.name));
  j["schema"] = SchemaJson(c.schema());
  return j;
}

nlohmann::ordered_json SetupJson(const OptimizerSetup& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["max_grad_norm"] = s.max_grad_norm;
  j["lr_schedule"] = LrScheduleJson(s.lr_schedule);
  j["children"] = nlohmann::ordered_json::array();
  auto main = ConfigJson(s.main);
  main["role"] = s.IsComposite() ? "whole_param" : "all";
  j["children"].push_back(main);
  if (s.scalar) {
    auto scalar = ConfigJson(*s.scalar);
    scalar["role"] = "scalar";
    j["children"].push_back(scalar);
  }
  return j;
}

nlohmann::ordered_json OptimizerSpecJson(const OptimizerSpec& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["title"] = s.title;
  j["source"] = s.source;
  j["placement"] = PlacementName(s.placement);
  j["schema"] = SchemaJson(s.schema);
  j["hyperparams"] = nlohmann::ordered_json::array();
  for (const auto& h : s.hyperparams)
    j["hyperparams"].push_back({{"name", h.name},
                                {"type", HyperTypeName(h.type)},
                                {"default", HyperValueJson(h.default_value)},
                                {"range", h.RangeText()},
                                {"per_group", h.per_group},
                                {"help", h.help}});
  nlohmann::ordered_json traits;
  traits["sign_based"] = s.sign_based;
  traits["needs_2d"] = s.needs_2d;
  if (!s.as_scalar.empty()) traits["as_scalar"] = s.as_scalar;
  if (!s.default_scalar.empty()) traits["default_scalar"] = s.default_scalar;
  if (!s.named_scalars.empty()) traits["named_scalars"] = s.named_scalars;
  j["traits"] = traits;
  return j;
}

nlohmann::ordered_json RegistryJson() {
  nlohmann::ordered_json j;
  j["kinds"] = nlohmann::ordered_json::array();
  for (const OptimizerEntry* e : Optimizers()) j["kinds"].push_back(OptimizerSpecJson(e->spec));
  j["setups"] = nlohmann::ordered_json::array();
  for (const auto& name : OptimizerSetup::Names()) {
    const OptimizerSetup s = OptimizerSetup::Defaults(name);
    nlohmann::ordered_json js;
    js["name"] = name;
    js["children"] = nlohmann::ordered_json::array();
    for (const OptimizerConfig* c : s.Children())
      js["children"].push_back({{"kind", c->kind()}, {"schema", SchemaJson(c->schema())}});
    j["setups"].push_back(js);
  }
  return j;
}

}  // namespace shardcheck
