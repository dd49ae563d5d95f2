#include "testing/test_only_optimizers.h"

#include "optimizers/adam.h"
#include "reference/registry.h"

namespace shardcheck {

namespace {

// AdamW's fused per-element kernel, run over one whole contiguous param.
void WholeAdamUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g,
                     std::vector<at::Tensor>& state) {
  static const ElementwiseKernel kernel = MakeElementwiseKernel<AdamKernel<true>>();
  ScalarBlock scalars;
  kernel.prepare(ctx, scalars);
  const at::Tensor grad = g.contiguous();
  ElementwiseSpan span;
  span.numel = p.numel();
  span.main = p.data_ptr<float>();
  span.grad = grad.data_ptr<float>();
  for (size_t k = 0; k < state.size(); ++k) span.state[k] = state[k].data_ptr<float>();
  kernel.run_cpu(scalars, span);
}

OptimizerSpec WholeAdamSpec() {
  OptimizerSpec s = AdamSpec(/*decoupled=*/true);
  s.name = "whole_adam";
  s.title = "test only: AdamW applied to whole 2-D params, layer-wise";
  s.source = "shardcheck tests";
  s.placement = Placement::kWholeParam;
  s.as_scalar.clear();
  s.default_scalar = "lion";
  s.named_scalars = {"lion"};
  s.test_only = true;
  return s;
}

}  // namespace

void RegisterTestOnlyOptimizers() {
  static bool done = false;
  if (done) return;
  done = true;
  RegisterOptimizer({WholeAdamSpec(), {}, &WholeAdamUpdate});
  RegisterReferenceUpdate("whole_adam", FindReferenceUpdate("adamw"));
}

}  // namespace shardcheck
