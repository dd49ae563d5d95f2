#include "harness/matrix/routing_check.h"

#include "spec/routing.h"

namespace shardcheck {

namespace {

// docs/optimizers.md, "Muon + scalar optimizer": the scalar optimizer takes a param "if its role is
// embedding or output, or it is not 2-D". Deliberately not
// GoesToScalarOptimizer: this is the second reading of the rule.
int ExpectedChild(const ParamInfo& p) {
  const bool embedding_or_output = p.role == ParamRole::kEmbedding || p.role == ParamRole::kOutput;
  return (embedding_or_output || p.shape.size() != 2) ? 1 : 0;
}

}  // namespace

CheckOutcome CheckRouting(const OptimizerSetup& setup, const std::vector<ParamInfo>& params) {
  CheckOutcome out;
  out.run = "setup";
  out.against = "the routing rule of docs/optimizers.md";
  const std::vector<ChildOptimizer> children = RouteParams(setup, params);
  std::vector<int> got(params.size(), -1);
  for (size_t c = 0; c < children.size(); ++c)
    for (int i : children[c].params) got[static_cast<size_t>(i)] = static_cast<int>(c);
  for (size_t i = 0; i < params.size(); ++i) {
    const int want = ExpectedChild(params[i]);
    if (got[i] == want) continue;
    out.verdict = Verdict::kFail;
    out.step = 0;
    out.tensor = params[i].name;
    out.detail = params[i].name + " (" + RoleName(params[i].role) + ", " +
                 std::to_string(params[i].shape.size()) + "-D) is routed to " +
                 (got[i] < 0 ? std::string("no optimizer")
                             : children[static_cast<size_t>(got[i])].config.kind()) +
                 ", the rule says " + children[static_cast<size_t>(want)].config.kind();
    return out;
  }
  out.detail = "every one of " + std::to_string(params.size()) + " params routed as the rule says";
  return out;
}

}  // namespace shardcheck
