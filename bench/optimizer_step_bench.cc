// shardcheck_bench: one optimizer step on one flat fp32 param, for every
// elementwise kind of the registry, at N = 1M, 16M and 64M elements (Google
// Benchmark; ci/bench runs it and summarizes, bench/README.md).
//
//   <kind>/reference/N    the reference update (reference/<kind>.cc, tensor
//                         ops) through ReferenceStep
//   <kind>/fused/N        the registry's fused CPU kernel on the same shard,
//                         one thread, as the DistributedOptimizer calls it
//                         (the widest instruction set this CPU runs,
//                         kernels/cpu_isa.h)
//   <kind>/fused_baseline/N   the same in the x86-64 baseline instance
//                         (SSE2), what the loop gives without the dispatch
//   <kind>/no_math/N      a pass with exactly the fused kernel's memory
//                         traffic and no floating-point math: the roofline
//   <kind>/fused_2t/N, <kind>/no_math_2t/N   the same, one call split over
//                         2 threads (kernels/parallel_elementwise.h), in
//                         real time
//   <kind>/torch_optim/N  libtorch's optimizer with the same update, where
//                         there is one (torch_optim_bench.cc)
//   stream/copy/N, stream/triad/N   STREAM's two kernels on fp32
//
// The kinds, their state arrays and their hyperparameters (each kind's
// defaults) come from the registry: a new elementwise kind is measured
// without a line of this file. ATen runs on --aten_threads threads
// (default 1, like the fused kernel), recorded in the JSON context.
// Benchmarks measure; they never check results (kernels/elementwise_test.cc
// does).
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/step_bench.h"
#include "bench/suites.h"
#include "kernels/cpu_isa.h"
#include "kernels/parallel_elementwise.h"
#include "reference/registry.h"
#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck::bench {
namespace {

// Fixed iteration counts at 64M elements (Configure): one 64M fused step
// takes a few hundred ms here, a reference step seconds.
constexpr int64_t kLargeFusedIterations = 4, kLargeReferenceIterations = 1,
                  kLargeStreamIterations = 10;

std::string Key(const std::string& kind, const char* variant, int64_t n) {
  return kind + "/" + variant + "/" + std::to_string(n);
}

// The fused kernel over the whole shard: one call, split over `threads`
// workers as the DistributedOptimizer splits it (--threads), in the active
// instruction set's instance, or in the baseline's when `baseline`.
void FusedStep(benchmark::State& state, const OptimizerEntry* entry, int threads, bool baseline) {
  const int64_t n = state.range(0);
  const CpuIsa active = ActiveCpuIsa();
  if (baseline) SetActiveCpuIsa(CpuIsa::kBaseline);
  StepInputs& in = Reused<StepInputs>(Key(entry->spec.name, "fused", n),
                                      [&] { return MakeStepInputs(*entry, n); });
  ElementwiseSpan span;
  span.numel = n;
  span.main = in.param.data_ptr<float>();
  span.grad = in.grad.data_ptr<float>();
  for (size_t k = 0; k < in.state.size(); ++k) span.state[k] = in.state[k].data_ptr<float>();
  ScalarBlock scalars;
  for (auto _ : state) {
    // What the DistributedOptimizer does per param group and step.
    ++in.step;
    entry->elementwise.prepare({&in.config, in.step, in.config.lr(), in.config.weight_decay()},
                               scalars);
    RunElementwiseThreads(entry->elementwise, scalars, span, threads);
    benchmark::ClobberMemory();
  }
  SetActiveCpuIsa(active);
  SetTrafficCounters(state, n, StepTrafficBytes(StateArrays(*entry), n));
}

void ReferenceUpdate(benchmark::State& state, const OptimizerEntry* entry) {
  const int64_t n = state.range(0);
  StepInputs& in = Reused<StepInputs>(Key(entry->spec.name, "reference", n),
                                      [&] { return MakeStepInputs(*entry, n); });
  for (auto _ : state) {
    ++in.step;
    ReferenceStep(in.config, /*wd_mult=*/1.0, in.step, /*lr_factor=*/1.0, in.param, in.grad,
                  in.state);
    benchmark::DoNotOptimize(in.param.data_ptr<float>());
    benchmark::ClobberMemory();
  }
  SetTrafficCounters(state, n, StepTrafficBytes(StateArrays(*entry), n));
}

// The no-math pass over K state arrays: reads the param, the grad and every
// state array, writes the param and every state array, as the fused kernel
// does. Each word written is the word read XOR the grad's word: no load is
// dead, no store repeats what memory holds, and there is no floating-point
// op. Words are uint32 (the arrays are never read as floats). Like the
// fused loop it exists once per instruction set (kernels/cpu_isa.h) and
// runs in the active one's, so the roofline uses the same vector width.
using NoMathPass = void (*)(int64_t n, uint32_t* p, const uint32_t* g, uint32_t* const* state);

template <size_t... I>
__attribute__((always_inline)) inline void NoMathLoop(int64_t n, uint32_t* __restrict p,
                                                      const uint32_t* __restrict g,
                                                      uint32_t* const* state,
                                                      std::index_sequence<I...>) {
  uint32_t* const s[] = {state[I]..., nullptr};
  (void)s;  // no state array: K = 0
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t gi = g[i];
    p[i] ^= gi;
    ((s[I][i] ^= gi), ...);
  }
}

template <size_t K>
void NoMathBaseline(int64_t n, uint32_t* p, const uint32_t* g, uint32_t* const* state) {
  NoMathLoop(n, p, g, state, std::make_index_sequence<K>{});
}
#if SHARDCHECK_CPU_ISA_DISPATCH
template <size_t K>
__attribute__((target("avx2"))) void NoMathAvx2(int64_t n, uint32_t* p, const uint32_t* g,
                                                uint32_t* const* state) {
  NoMathLoop(n, p, g, state, std::make_index_sequence<K>{});
}
template <size_t K>
__attribute__((target("avx512f"))) void NoMathAvx512(int64_t n, uint32_t* p, const uint32_t* g,
                                                     uint32_t* const* state) {
  NoMathLoop(n, p, g, state, std::make_index_sequence<K>{});
}
#endif

// The pass of K state arrays in the active instruction set's instance.
template <size_t K>
void NoMathPassOf(int64_t n, uint32_t* p, const uint32_t* g, uint32_t* const* state) {
#if SHARDCHECK_CPU_ISA_DISPATCH
  switch (ActiveCpuIsa()) {
    case CpuIsa::kAvx512:
      return NoMathAvx512<K>(n, p, g, state);
    case CpuIsa::kAvx2:
      return NoMathAvx2<K>(n, p, g, state);
    case CpuIsa::kBaseline:
      break;
  }
#endif
  NoMathBaseline<K>(n, p, g, state);
}

template <size_t... K>
constexpr std::array<NoMathPass, sizeof...(K)> NoMathTable(std::index_sequence<K...>) {
  return {&NoMathPassOf<K>...};
}

// The pass of every state count a kind may declare (0 .. kMaxStateKeys).
constexpr auto kNoMathPasses = NoMathTable(std::make_index_sequence<kMaxStateKeys + 1>{});

// The no-math pass's arrays: param, grad and `state_count` state arrays of
// `n` words each, filled (and so touched) before timing.
struct NoMathInputs {
  std::vector<at::Tensor> arrays;  // param, grad, state...; (n,) int32 each
  NoMathInputs(int state_count, int64_t n) {
    for (int a = 0; a < 2 + state_count; ++a) {
      arrays.push_back(at::empty({n}, at::kInt));
      uint32_t* w = Words(static_cast<size_t>(a));
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<uint32_t>(i) * 2654435761u + a;
    }
  }
  uint32_t* Words(size_t a) { return reinterpret_cast<uint32_t*>(arrays[a].data_ptr<int32_t>()); }
};

// The no-math pass, split over `threads` workers like FusedStep.
void NoMath(benchmark::State& state, const OptimizerEntry* entry, int threads) {
  const int64_t n = state.range(0);
  const int states = StateArrays(*entry);
  NoMathInputs& in = Reused<NoMathInputs>(Key(entry->spec.name, "no_math", n),
                                          [&] { return NoMathInputs(states, n); });
  std::array<uint32_t*, kMaxStateKeys> st{};
  for (int k = 0; k < states; ++k)
    st[static_cast<size_t>(k)] = in.Words(2 + static_cast<size_t>(k));
  uint32_t* p = in.Words(0);
  const uint32_t* g = in.Words(1);
  const NoMathPass pass = kNoMathPasses[static_cast<size_t>(states)];
  for (auto _ : state) {
    benchmark::DoNotOptimize(p);
    ForEachChunk(n, threads, kMinElementsPerThread, [&](int64_t begin, int64_t count) {
      std::array<uint32_t*, kMaxStateKeys> sub{};
      for (int k = 0; k < states; ++k)
        sub[static_cast<size_t>(k)] = st[static_cast<size_t>(k)] + begin;
      pass(count, p + begin, g + begin, sub.data());
    });
    benchmark::ClobberMemory();
  }
  SetTrafficCounters(state, n, StepTrafficBytes(states, n));
}

// STREAM (McCalpin) on fp32: copy c = a (8 bytes per element), triad
// a = b + q * c (12 bytes per element).
struct StreamArrays {
  at::Tensor a, b, c;  // (n,) fp32 each
  explicit StreamArrays(int64_t n)
      : a(at::full({n}, 1.0f)), b(at::full({n}, 2.0f)), c(at::full({n}, 0.5f)) {}
};

void StreamCopy(benchmark::State& state) {
  const int64_t n = state.range(0);
  StreamArrays& s = Reused<StreamArrays>(Key("stream", "copy", n), [&] { return StreamArrays(n); });
  const float* __restrict a = s.a.data_ptr<float>();
  float* __restrict c = s.c.data_ptr<float>();
  for (auto _ : state) {
    benchmark::DoNotOptimize(c);
    for (int64_t i = 0; i < n; ++i) c[i] = a[i];
    benchmark::ClobberMemory();
  }
  SetTrafficCounters(state, n, 8.0 * static_cast<double>(n));
}

void StreamTriad(benchmark::State& state) {
  const int64_t n = state.range(0);
  StreamArrays& s =
      Reused<StreamArrays>(Key("stream", "triad", n), [&] { return StreamArrays(n); });
  float* __restrict a = s.a.data_ptr<float>();
  const float* __restrict b = s.b.data_ptr<float>();
  const float* __restrict c = s.c.data_ptr<float>();
  const float q = 3.0f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(a);
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + q * c[i];
    benchmark::ClobberMemory();
  }
  SetTrafficCounters(state, n, 12.0 * static_cast<double>(n));
}

// Registers every benchmark; returns the number of elementwise kinds.
int RegisterAll() {
  for (int64_t n : StepSizes()) {
    Configure(benchmark::RegisterBenchmark("stream/copy", StreamCopy), n, kLargeStreamIterations);
    Configure(benchmark::RegisterBenchmark("stream/triad", StreamTriad), n, kLargeStreamIterations);
  }
  int kinds = 0;
  for (const OptimizerEntry* e : Optimizers()) {
    if (e->spec.placement != Placement::kElementwise || !e->elementwise) continue;
    ++kinds;
    const std::string& kind = e->spec.name;
    for (int64_t n : StepSizes())
      Configure(benchmark::RegisterBenchmark((kind + "/reference").c_str(), ReferenceUpdate, e), n,
                kLargeReferenceIterations);
    for (int threads : {1, 2}) {
      const std::string suffix = threads == 1 ? "" : "_" + std::to_string(threads) + "t";
      for (int64_t n : StepSizes())
        Configure(benchmark::RegisterBenchmark((kind + "/fused" + suffix).c_str(), FusedStep, e,
                                               threads, false),
                  n, kLargeFusedIterations);
      for (int64_t n : StepSizes())
        Configure(
            benchmark::RegisterBenchmark((kind + "/no_math" + suffix).c_str(), NoMath, e, threads),
            n, kLargeFusedIterations);
    }
    if (ActiveCpuIsa() != CpuIsa::kBaseline)
      for (int64_t n : StepSizes())
        Configure(
            benchmark::RegisterBenchmark((kind + "/fused_baseline").c_str(), FusedStep, e, 1, true),
            n, kLargeFusedIterations);
    RegisterTorchOptimBenchmarks(*e);
  }
  return kinds;
}

void PrintHelp() {
  benchmark::PrintDefaultHelp();
  std::fprintf(stdout,
               "shardcheck_bench also takes:\n"
               "  [--aten_threads=<n>]   ATen intra-op threads of the reference, torch_optim and\n"
               "                         Newton-Schulz benchmarks (default 1; the fused kernel\n"
               "                         runs on one)\n"
               "  [--scratch_dir=<dir>]  where the checkpoint benchmarks write (default\n"
               "                         out/bench/scratch; removed as they end)\n"
               "Names: <kind>/{reference,fused,fused_baseline,no_math,fused_2t,no_math_2t,\n"
               "torch_optim}/N,\n"
               "stream/{copy,triad}/N, dist_step/adamw/dp<D>/N, dist_state/<setup>/dp<D>/N,\n"
               "checkpoint/plain/{write,read_cold,read_warm}/N,\n"
               "checkpoint/<type>/{save,load_warm,load_cold,load_reshard_cold}/N,\n"
               "newton_schulz/<rows>/<cols>, at_mm/<rows>/<cols>;\n"
               "ci/bench runs them and writes out/bench/summary.md (bench/README.md).\n");
}

// Removes --aten_threads=N from argv (Google Benchmark rejects flags it
// does not know); returns N, or 1 when absent, or -1 when malformed.
int TakeAtenThreads(int* argc, char** argv) {
  int threads = 1, out = 1;
  const char* flag = "--aten_threads=";
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      char* end = nullptr;
      const long v = std::strtol(argv[i] + std::strlen(flag), &end, 10);
      threads = (*end == '\0' && v > 0 && v < 1024) ? static_cast<int>(v) : -1;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return threads;
}

// Removes --scratch_dir=DIR from argv; returns DIR, or "" when absent.
std::string TakeScratchDir(int* argc, char** argv) {
  std::string dir;
  const char* flag = "--scratch_dir=";
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0)
      dir = argv[i] + std::strlen(flag);
    else
      argv[out++] = argv[i];
  }
  *argc = out;
  return dir;
}

int Main(int argc, char** argv) {
  const std::string scratch = TakeScratchDir(&argc, argv);
  if (!scratch.empty()) SetCheckpointScratchDir(scratch);
  const int threads = TakeAtenThreads(&argc, argv);
  if (threads < 0) {
    std::fprintf(stderr, "shardcheck_bench: --aten_threads takes a positive integer\n");
    return 2;
  }
  at::set_num_threads(threads);
  if (RegisterAll() == 0) {
    std::fprintf(stderr, "shardcheck_bench: the registry has no elementwise optimizer\n");
    return 1;
  }
  RegisterNewtonSchulzBenchmarks();
  RegisterDistributedBenchmarks();
  RegisterCheckpointBenchmarks();
  benchmark::Initialize(&argc, argv, PrintHelp);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("aten_threads", std::to_string(at::get_num_threads()));
  benchmark::AddCustomContext("fused_threads", "1 (fused, no_math), 2 (fused_2t, no_math_2t)");
  benchmark::AddCustomContext("cpu_isa", CpuIsaName(ActiveCpuIsa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace shardcheck::bench

int main(int argc, char** argv) { return shardcheck::bench::Main(argc, argv); }
