#include "reference/routing.h"

namespace shardcheck {

std::vector<ChildOptimizer> RouteParams(const OptimizerSetup& setup,
                                        const std::vector<ParamInfo>& params) {
  std::vector<ChildOptimizer> children;
  children.push_back({setup.main, SchemaFor(setup.main.kind), {}});
  if (setup.scalar) children.push_back({*setup.scalar, SchemaFor(setup.scalar->kind), {}});
  for (size_t i = 0; i < params.size(); ++i) {
    const int child = (setup.IsMuon() && IsMuonExcluded(params[i])) ? 1 : 0;
    children[static_cast<size_t>(child)].params.push_back(static_cast<int>(i));
  }
  return children;
}

std::vector<ParamGroup> BuildGroups(const std::vector<ChildOptimizer>& children,
                                    const std::vector<ParamInfo>& params) {
  std::vector<ParamGroup> groups;
  for (size_t c = 0; c < children.size(); ++c) {
    for (double wd_mult : {1.0, 0.0}) {
      ParamGroup g{static_cast<int>(c), wd_mult, {}};
      for (int i : children[c].params)
        if (params[static_cast<size_t>(i)].DefaultWdMult() == wd_mult) g.params.push_back(i);
      if (!g.params.empty()) groups.push_back(std::move(g));
    }
  }
  return groups;
}

float ClipCoefficient(double max_norm, double norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace shardcheck
