#include "harness/cell/oracle_run.h"

#include <cmath>

#include "spec/error.h"

namespace shardcheck {

void OracleRunOptions::Validate() const {
  setup.Validate();
  if (steps < 0) throw Error("--steps must be >= 0");
  if (dtype != at::kFloat && dtype != at::kBFloat16) throw Error("--dtype must be fp32 or bf16");
  if (micro_batches < 1 || micro_batches > 32)
    throw Error("--micro-batches must be in [1, 32] (larger M breaks the oracle's exact sums)");
  if (const OptimizerConfig* needs = setup.NeedsMatrix(); needs && !model.HasMatrixParams())
    throw Error("optimizer " + setup.name + " needs a 2-D hidden weight (for " + needs->kind() +
                "), and model " + model.name + " has none");
}

std::vector<at::Tensor> InitialParams(const ModelSpec& model, uint64_t seed,
                                      c10::ScalarType dtype) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < model.params.size(); ++i)
    out.push_back(InitialParam(seed, i, model.params[i].shape, dtype));
  return out;
}

std::vector<at::Tensor> GlobalGrads(const ModelSpec& model, uint64_t seed, uint64_t step,
                                    int micro_batches) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < model.params.size(); ++i)
    out.push_back(GlobalGrad(seed, step, i, model.params[i].shape, micro_batches));
  return out;
}

double UpdateNorm(const std::vector<at::Tensor>& before, const std::vector<at::Tensor>& after) {
  double sumsq = 0.0;
  for (size_t i = 0; i < before.size(); ++i)
    sumsq += (after[i].to(at::kDouble) - before[i].to(at::kDouble)).square().sum().item<double>();
  return std::sqrt(sumsq);
}

ReferenceOptimizer RunReferenceOnOracle(const OracleRunOptions& opts, const StepCallback& on_step) {
  opts.Validate();
  ReferenceOptimizer opt(opts.setup, opts.model.params,
                         InitialParams(opts.model, opts.seed, opts.dtype), opts.device);
  for (int s = 1; s <= opts.steps; ++s) {
    std::vector<at::Tensor> before = opt.main_params();
    opt.Step(GlobalGrads(opts.model, opts.seed, static_cast<uint64_t>(s), opts.micro_batches));
    if (on_step) on_step(opt, UpdateNorm(before, opt.main_params()));
  }
  return opt;
}

}  // namespace shardcheck
