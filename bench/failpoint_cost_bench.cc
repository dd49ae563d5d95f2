// The cost of the silent-bug switches when they are off (docs/detection.md):
// the Lion kernel, whose Update branches on two loop-invariant flags that
// Prepare reads from the failpoint registry once per call, against the same
// kernel compiled without them (LionKernelT<false>), side by side in one
// binary, on the same shard, one thread:
//
//   failpoints/lion/with_switches/N   the registered kernel, switches off
//   failpoints/lion/without/N         no switch in the code at all
//
// This file gets the kernels' compile flags (CMakeLists.txt), so both loops
// are built as the registration list builds them.
#include <benchmark/benchmark.h>

#include <string>

#include "bench/step_bench.h"
#include "optimizers/lion.h"
#include "spec/registry.h"

namespace shardcheck::bench {
namespace {

template <bool kSwitches>
void LionStep(benchmark::State& state) {
  const int64_t n = state.range(0);
  const OptimizerEntry& entry = FindOptimizer("lion");
  StepInputs& in = Reused<StepInputs>("failpoints/lion/" + std::to_string(n),
                                      [&] { return MakeStepInputs(entry, n); });
  static const ElementwiseKernel kernel = MakeElementwiseKernel<LionKernelT<kSwitches>>();
  ElementwiseSpan span;
  span.numel = n;
  span.main = in.param.data_ptr<float>();
  span.grad = in.grad.data_ptr<float>();
  span.state[0] = in.state[0].data_ptr<float>();
  ScalarBlock scalars;
  for (auto _ : state) {
    ++in.step;
    kernel.prepare({&in.config, in.step, in.config.lr(), in.config.weight_decay()}, scalars);
    kernel.run_cpu(scalars, span);
    benchmark::ClobberMemory();
  }
  SetTrafficCounters(state, n, StepTrafficBytes(1, n));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {int64_t{1} << 20, int64_t{1} << 24, int64_t{1} << 26}) b->Arg(n);
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(LionStep<true>)->Name("failpoints/lion/with_switches")->Apply(Sizes);
BENCHMARK(LionStep<false>)->Name("failpoints/lion/without")->Apply(Sizes);

}  // namespace
}  // namespace shardcheck::bench
