// What the optimizer-step benchmarks share (optimizer_step_bench.cc and
// torch_optim_bench.cc): the sizes, the inputs of one step, the bytes an
// elementwise kind moves per step, the counters every benchmark reports and
// the one set of inputs kept alive between repetitions.
#pragma once

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck::bench {

// N of every optimizer-step benchmark, in fp32 elements: 1M, 16M and 64M
// (2^20, 2^24, 2^26).
const std::vector<int64_t>& StepSizes();

// The bytes one fused step of a kind with `state_count` state keys moves on
// `n` elements without a model write-back: it reads the param, the grad and
// every state array and writes the param and every state array, 4 bytes
// each (AdamW: 7 x 4 = 28 bytes per element). Every variant of a kind
// (reference, fused, no_math, torch_optim) reports this figure, so their
// bytes_per_second compare directly.
double StepTrafficBytes(int state_count, int64_t n);

// The number of state arrays of `entry`: its state schema's key count.
inline int StateArrays(const OptimizerEntry& entry) {
  return static_cast<int>(entry.spec.schema.keys.size());
}

// Sets the counters of a benchmark that moves `bytes_per_step` bytes per
// iteration over `n` elements: `bytes_per_second` (a rate over the real
// time), `bytes_per_step` and `elements`.
void SetTrafficCounters(benchmark::State& state, int64_t n, double bytes_per_step);

// Applies what every benchmark of this suite uses: real time, milliseconds,
// the argument `n` and, at 64M elements and above, the fixed iteration count
// `large_iterations` (so that those runs stay short; below 64M Google
// Benchmark chooses).
benchmark::internal::Benchmark* Configure(benchmark::internal::Benchmark* b, int64_t n,
                                          int64_t large_iterations);

// A param of `n` fp32 elements and the grad every benchmark steps with,
// from fixed seeds through the gradient oracle (testing/oracle.h): the
// param is InitialParam (|p| <= 0.5), the grad GlobalGrad with one
// micro-batch (multiples of 2^-24, |g| <= 2^-10). (n,) fp32 each.
at::Tensor MakeParam(int64_t n);
at::Tensor MakeGrad(int64_t n);

// The inputs of one elementwise kind's step on one flat param of `n`
// elements: the kind's default hyperparameters, MakeParam and MakeGrad, and
// the state that one fused step from zero state left on another grad (so
// every moment is nonzero and far from the denormals, as after a real first
// step); `step` is 1, the steps taken.
struct StepInputs {
  OptimizerConfig config;
  at::Tensor param;               // (n,) fp32
  at::Tensor grad;                // (n,) fp32
  std::vector<at::Tensor> state;  // schema order, (n,) fp32 each
  int64_t step = 0;
};
StepInputs MakeStepInputs(const OptimizerEntry& entry, int64_t n);

// The one set of benchmark inputs alive at a time. Google Benchmark calls a
// benchmark's function once per repetition: inputs are built on the first
// call with a new `key` (after the previous ones are freed, so two 64M sets
// never coexist) and reused by the following calls with the same key. The
// state evolves from call to call, as in training. Not thread-safe.
struct ReuseSlot {
  std::string key;
  std::shared_ptr<void> value;
};
ReuseSlot& TheReuseSlot();

template <class T, class Make>
T& Reused(const std::string& key, Make&& make) {
  ReuseSlot& slot = TheReuseSlot();
  if (slot.key != key || !slot.value) {
    slot.value.reset();
    slot.key.clear();
    slot.value = std::make_shared<T>(std::forward<Make>(make)());
    slot.key = key;
  }
  return *static_cast<T*>(slot.value.get());
}

// Registers `<kind>/torch_optim/N` for every size when libtorch has an
// optimizer with the same update as `entry` (torch::optim::Adam, AdamW,
// SGD), built from the kind's default hyperparameters. Returns whether it
// did (torch_optim_bench.cc).
bool RegisterTorchOptimBenchmarks(const OptimizerEntry& entry);

}  // namespace shardcheck::bench
