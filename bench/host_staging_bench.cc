// The first touch of a fresh host buffer, as a checkpoint's staging meets
// it (distributed/host_staging.h): 512 MiB allocated and written once,
// side by side in one binary, one thread:
//
//   host_staging/first_touch/at_empty/N        at::empty, then fill (4 KiB
//                                              page faults)
//   host_staging/first_touch/huge_pages/N      at::empty with MADV_HUGEPAGE
//                                              asked for, then fill
//   host_staging/second_touch/N                the same fill of a buffer
//                                              already touched: no faults
//
// N is the float count (128M = 512 MiB). bytes_per_second over the bytes
// written. EmptyHostStaging allocates the at_empty way: the huge-page
// variant is here to show why.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdint>

#include "bench/step_bench.h"

namespace shardcheck::bench {
namespace {

constexpr int64_t kNumel = int64_t{128} << 20;

// at::empty with transparent huge pages asked for on its 2 MiB-aligned part.
at::Tensor EmptyHugePages(int64_t n) {
  at::Tensor t = at::empty({n}, at::kFloat);
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t lo = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (begin + static_cast<uintptr_t>(t.nbytes())) & ~(kHuge - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  return t;
}

void FirstTouch(benchmark::State& state, bool huge) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    at::Tensor t = huge ? EmptyHugePages(n) : at::empty({n}, at::kFloat);
    t.fill_(1.0f);
    benchmark::DoNotOptimize(t.data_ptr());
  }
  SetTrafficCounters(state, n, 4.0 * static_cast<double>(n));
}

void SecondTouch(benchmark::State& state) {
  const int64_t n = state.range(0);
  at::Tensor t = at::zeros({n}, at::kFloat);
  for (auto _ : state) {
    t.fill_(1.0f);
    benchmark::DoNotOptimize(t.data_ptr());
  }
  SetTrafficCounters(state, n, 4.0 * static_cast<double>(n));
}

BENCHMARK_CAPTURE(FirstTouch, at_empty, false)
    ->Name("host_staging/first_touch/at_empty")->Arg(kNumel)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(FirstTouch, huge_pages, true)
    ->Name("host_staging/first_touch/huge_pages")->Arg(kNumel)->Unit(benchmark::kMillisecond);
BENCHMARK(SecondTouch)->Name("host_staging/second_touch")->Arg(kNumel)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardcheck::bench
