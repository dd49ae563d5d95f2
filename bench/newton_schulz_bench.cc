// Newton–Schulz (kernels/newton_schulz.h, Muon's orthogonalization, fp32,
// 5 iterations, the default coefficients) against ATen's own matmul on the
// same shapes, in GFLOP/s (counter flops_per_second):
//
//   newton_schulz/<rows>/<cols>  NS(G) of a rows x cols fp32 matrix; per
//       iteration, with m = min(rows, cols) and n = max: A = X X^T (2m^2 n
//       flops), B = bA + cA^2 (2m^3), X = aX + BX (2m^2 n)
//   at_mm/<rows>/<cols>          at::mm of the m x n matrix with its
//       transpose (2m^2 n flops), the product NS spends most of its time in
//
// Shapes 256², 512², 512 x 2048 and its transpose: Debian's libtorch calls
// the reference (netlib) BLAS, a few GFLOP/s, so larger shapes take tens of
// seconds a call. ATen runs on --aten_threads threads (default 1). The gap
// between the two is NS's own overhead (normalization, the scaled
// additions, transposes).
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "bench/suites.h"
#include "kernels/newton_schulz.h"
#include "testing/oracle.h"

namespace shardcheck::bench {
namespace {

constexpr uint64_t kSeed = 20241204;

at::Tensor Matrix(int64_t rows, int64_t cols) {
  return GlobalGrad(kSeed, 1, 0, {rows, cols}, /*micro_batches=*/1);
}

void SetFlops(benchmark::State& state, double flops_per_call) {
  state.counters["flops_per_second"] = benchmark::Counter(
      flops_per_call * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["flops_per_call"] = flops_per_call;
}

void NewtonSchulzStep(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const at::Tensor g = Matrix(rows, cols);
  const NewtonSchulzOptions o;
  for (auto _ : state) {
    at::Tensor x = NewtonSchulz(g, o);
    benchmark::DoNotOptimize(x.data_ptr<float>());
  }
  const double m = static_cast<double>(std::min(rows, cols));
  const double n = static_cast<double>(std::max(rows, cols));
  SetFlops(state, o.steps * (4 * m * m * n + 2 * m * m * m));
}

void AtMm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols);
  const at::Tensor x = Matrix(m, n);
  const at::Tensor xt = x.t();
  for (auto _ : state) {
    at::Tensor a = at::mm(x, xt);
    benchmark::DoNotOptimize(a.data_ptr<float>());
  }
  SetFlops(state, 2.0 * static_cast<double>(m) * static_cast<double>(m) * static_cast<double>(n));
}

}  // namespace

void RegisterNewtonSchulzBenchmarks() {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {256, 256}, {512, 512}, {512, 2048}, {2048, 512}};
  for (const auto& [r, c] : shapes) {
    benchmark::RegisterBenchmark("newton_schulz", NewtonSchulzStep)
        ->Args({r, c})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("at_mm", AtMm)
        ->Args({r, c})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace shardcheck::bench
