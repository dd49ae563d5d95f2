#include "spec/optimizer_spec.h"

namespace shardcheck {

std::string PlacementName(Placement p) {
  switch (p) {
    case Placement::kElementwise:
      return "elementwise";
    case Placement::kWholeParam:
      return "whole_param";
  }
  return "?";
}

const HyperParamSpec* OptimizerSpec::FindHyperParam(const std::string& n) const {
  for (const auto& h : hyperparams)
    if (h.name == n) return &h;
  return nullptr;
}

std::vector<std::string> OptimizerSpec::HyperParamNames() const {
  std::vector<std::string> out;
  for (const auto& h : hyperparams) out.push_back(h.name);
  return out;
}

}  // namespace shardcheck
