// `<kind>/torch_optim/N`: libtorch's own optimizer with the same update as a
// registry kind (torch::optim::Adam for adam, AdamW for adamw, SGD for sgd)
// stepping one param of N elements whose grad is set, with the kind's
// default hyperparameters. The param and grad are the other benchmarks'
// (step_bench.h); libtorch creates its state on the first step, which runs
// before timing, so the state is nonzero when timing starts. Its own TU:
// the torch::optim headers are heavy.
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/step_bench.h"
#include "spec/config.h"

namespace shardcheck::bench {
namespace {

using TorchOptimizer = std::unique_ptr<torch::optim::Optimizer>;
using Factory = TorchOptimizer (*)(const OptimizerConfig& c, const torch::Tensor& param);

std::tuple<double, double> Betas(const OptimizerConfig& c) {
  return std::make_tuple(c.Real("beta1"), c.Real("beta2"));
}

TorchOptimizer MakeAdam(const OptimizerConfig& c, const torch::Tensor& param) {
  return std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{param},
                                              torch::optim::AdamOptions(c.lr())
                                                  .betas(Betas(c))
                                                  .eps(c.Real("eps"))
                                                  .weight_decay(c.weight_decay()));
}

TorchOptimizer MakeAdamW(const OptimizerConfig& c, const torch::Tensor& param) {
  return std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{param},
                                               torch::optim::AdamWOptions(c.lr())
                                                   .betas(Betas(c))
                                                   .eps(c.Real("eps"))
                                                   .weight_decay(c.weight_decay()));
}

TorchOptimizer MakeSgd(const OptimizerConfig& c, const torch::Tensor& param) {
  return std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{param},
                                             torch::optim::SGDOptions(c.lr())
                                                 .momentum(c.Real("momentum"))
                                                 .dampening(0.0)
                                                 .weight_decay(c.weight_decay())
                                                 .nesterov(c.Flag("nesterov")));
}

// The registry kinds libtorch has a counterpart of, with the same update
// (docs/optimizers.md: Adam and AdamW as PyTorch's, SGD without dampening).
const std::map<std::string, Factory>& Counterparts() {
  static const std::map<std::string, Factory> table = {
      {"adam", &MakeAdam}, {"adamw", &MakeAdamW}, {"sgd", &MakeSgd}};
  return table;
}

// Fixed iterations at 64M elements (Configure): a step takes about a second.
constexpr int64_t kLargeIterations = 2;

// One param with its grad set and its optimizer, after one untimed step.
struct TorchStep {
  torch::Tensor param;  // (n,) fp32, requires grad; its grad is MakeGrad(n)
  TorchOptimizer optimizer;
  TorchStep(const OptimizerEntry& entry, Factory make, int64_t n)
      : param(MakeParam(n).set_requires_grad(true)) {
    param.mutable_grad() = MakeGrad(n);
    optimizer = make(OptimizerConfig::Defaults(entry.spec.name), param);
    optimizer->step();
  }
};

void TorchOptimStep(benchmark::State& state, const OptimizerEntry* entry, Factory make) {
  const int64_t n = state.range(0);
  TorchStep& s = Reused<TorchStep>(entry->spec.name + "/torch_optim/" + std::to_string(n),
                                   [&] { return TorchStep(*entry, make, n); });
  for (auto _ : state) {
    s.optimizer->step();
    benchmark::DoNotOptimize(s.param.data_ptr<float>());
    benchmark::ClobberMemory();
  }
  SetTrafficCounters(state, n, StepTrafficBytes(StateArrays(*entry), n));
}

}  // namespace

bool RegisterTorchOptimBenchmarks(const OptimizerEntry& entry) {
  const auto it = Counterparts().find(entry.spec.name);
  if (it == Counterparts().end()) return false;
  const Factory make = it->second;
  for (int64_t n : StepSizes()) {
    auto* b = benchmark::RegisterBenchmark((entry.spec.name + "/torch_optim").c_str(),
                                           TorchOptimStep, &entry, make);
    Configure(b, n, kLargeIterations);
  }
  return true;
}

}  // namespace shardcheck::bench
