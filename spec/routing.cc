#include "spec/routing.h"

#include "spec/failpoint.h"

namespace shardcheck {

std::vector<ChildOptimizer> RouteParams(const OptimizerSetup& setup,
                                        const std::vector<ParamInfo>& params) {
  std::vector<ChildOptimizer> children;
  for (const OptimizerConfig* c : setup.Children()) children.push_back({*c, c->schema(), {}});
  // The silent bug scalar_params_routed_to_muon looks at the number of
  // dimensions only (docs/detection.md): shared by the reference and the
  // DistributedOptimizer, so only the routing check of a cell sees it.
  const bool dims_only = setup.IsComposite() && FailpointOn("scalar_params_routed_to_muon");
  for (size_t i = 0; i < params.size(); ++i) {
    const bool scalar = dims_only ? params[i].shape.size() != 2 : GoesToScalarOptimizer(params[i]);
    const int child = (setup.IsComposite() && scalar) ? 1 : 0;
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

std::vector<GroupRecord> GroupRecords(const std::vector<ChildOptimizer>& children,
                                      const std::vector<ParamInfo>& params) {
  std::vector<GroupRecord> out;
  for (const ParamGroup& g : BuildGroups(children, params)) {
    const OptimizerConfig& c = children[static_cast<size_t>(g.child)].config;
    GroupRecord r{c.kind(), g.wd_mult, c.lr(), c.weight_decay(), {}};
    for (int i : g.params) r.params.push_back(params[static_cast<size_t>(i)].name);
    out.push_back(std::move(r));
  }
  return out;
}

float ClipCoefficient(double max_norm, double norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace shardcheck
