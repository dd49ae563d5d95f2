#include "bench/step_bench.h"

#include "testing/oracle.h"

namespace shardcheck::bench {

namespace {
constexpr uint64_t kSeed = 20240917;
constexpr uint64_t kParamId = 0;
constexpr uint64_t kWarmUpGradStep = 1;
constexpr uint64_t kGradStep = 2;
}  // namespace

const std::vector<int64_t>& StepSizes() {
  static const std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{16} << 20,
                                             int64_t{64} << 20};
  return sizes;
}

double StepTrafficBytes(int state_count, int64_t n) {
  const int arrays_read = 2 + state_count, arrays_written = 1 + state_count;
  return static_cast<double>(n) * 4.0 * (arrays_read + arrays_written);
}

void SetTrafficCounters(benchmark::State& state, int64_t n, double bytes_per_step) {
  const double iterations = static_cast<double>(state.iterations());
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes_per_step * iterations, benchmark::Counter::kIsRate);
  state.counters["bytes_per_step"] = benchmark::Counter(bytes_per_step);
  state.counters["elements"] = benchmark::Counter(static_cast<double>(n));
}

benchmark::internal::Benchmark* Configure(benchmark::internal::Benchmark* b, int64_t n,
                                          int64_t large_iterations) {
  b->Arg(n)->UseRealTime()->Unit(benchmark::kMillisecond);
  if (n >= (int64_t{64} << 20)) b->Iterations(large_iterations);
  return b;
}

at::Tensor MakeParam(int64_t n) { return InitialParam(kSeed, kParamId, {n}, at::kFloat); }

at::Tensor MakeGrad(int64_t n) {
  return GlobalGrad(kSeed, kGradStep, kParamId, {n}, /*micro_batches=*/1);
}

StepInputs MakeStepInputs(const OptimizerEntry& entry, int64_t n) {
  StepInputs in;
  in.config = OptimizerConfig::Defaults(entry.spec.name);
  in.param = MakeParam(n);
  for (size_t k = 0; k < entry.spec.schema.keys.size(); ++k) in.state.push_back(at::zeros({n}));
  // One fused step from zero state on the warm-up grad.
  ScalarBlock scalars;
  in.step = 1;
  entry.elementwise.prepare({&in.config, in.step, in.config.lr(), in.config.weight_decay()},
                            scalars);
  ElementwiseSpan span;
  span.numel = n;
  span.main = in.param.data_ptr<float>();
  {
    const at::Tensor warm_up_grad = GlobalGrad(kSeed, kWarmUpGradStep, kParamId, {n}, 1);
    span.grad = warm_up_grad.data_ptr<float>();
    for (size_t k = 0; k < in.state.size(); ++k) span.state[k] = in.state[k].data_ptr<float>();
    entry.elementwise.run_cpu(scalars, span);
  }  // the warm-up grad is freed before the benchmarked one is drawn
  in.grad = MakeGrad(n);
  return in;
}

ReuseSlot& TheReuseSlot() {
  static ReuseSlot slot;
  return slot;
}

}  // namespace shardcheck::bench
