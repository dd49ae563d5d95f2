// The DistributedOptimizer's step and its per-rank state, on the GPT-shaped
// models of bench/scaling_model.h, with ranks as threads of this process.
//
//   dist_step/<setup>/dp<D>/N   one Step() of `setup` on an N-param model at
//       DP size D over Gloo (the in-process double where the build has no
//       Gloo): the median-free mean of 3 steps after a warm-up step, rank
//       0's wall time, split by the collectives' own time (TimedCommunicator):
//       counters rs_ms (reduce-scatter of the grad buckets), ag_ms
//       (all-gather of the param buckets), allreduce_ms (the grad norm's and
//       other all-reduces), update_ms (the rest: the fused update of this
//       rank's shard, the main -> model copy, the norm's local sums),
//       slowest_rank_ms, state_bytes (this setup's largest per-rank main
//       params + state).
//   dist_state/<setup>/dp<D>/N  the per-rank bytes of fp32 main params and
//       optimizer state after construction, for every named setup
//       (elementwise kinds and Muon's composites): state_bytes_max,
//       state_bytes_min, state_bytes_mean, and dp1_share (max / (dp 1's
//       bytes / D): 1.00 is a perfect split). Its time is construction.
//
// Megatron's bucket size: max(40,000,000, 1,000,000 x D) elements.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/scaling_model.h"
#include "bench/step_bench.h"
#include "bench/suites.h"
#include "bench/timed_communicator.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "spec/config.h"

namespace shardcheck::bench {
namespace {

constexpr int kTimedSteps = 3;
constexpr auto kTimeout = std::chrono::seconds(600);

int64_t MegatronBucketSize(int dp) { return std::max<int64_t>(40000000, int64_t{1000000} * dp); }

// The model, its params and grads of one size, built once and shared
// (read-only) by every rank thread and every benchmark of that size.
struct ModelInputs {
  ModelSpec model;
  std::vector<at::Tensor> params, grads;
  explicit ModelInputs(int64_t n)
      : model(ScalingModel(n)), params(ScalingParams(model)), grads(ScalingGrads(model)) {}
};

// What one rank measured.
struct RankFigures {
  double step_s = 0;                // per step
  TimedCommunicator::Seconds comm;  // per step
  int64_t state_bytes = 0;
};

// Runs `body` on `dp` thread-ranks; rethrows the first rank's error.
void OnRanks(int dp, bool gloo, const std::function<void(Communicator&)>& body) {
  const std::vector<std::exception_ptr> errors =
      gloo ? RunRanksInProcess(dp, kTimeout, body) : RunLocalRanksInProcess(dp, kTimeout, body);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

RankFigures TimeSteps(const OptimizerSetup& setup, const ModelInputs& in, Communicator& comm) {
  TimedCommunicator timed(comm);
  const int dp = comm.size();
  DistributedOptimizer opt(setup, in.model.params, at::kFloat, timed,
                           DistOptions{MegatronBucketSize(dp), at::kCPU, 1});
  opt.SetParams(in.params);
  for (size_t i = 0; i < in.grads.size(); ++i) opt.Grad(static_cast<int>(i)).copy_(in.grads[i]);
  opt.Step();  // warm-up: first touch of the state, Gloo's buffers
  timed.Barrier();
  timed.Reset();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < kTimedSteps; ++s) opt.Step();
  RankFigures f;
  f.step_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kTimedSteps;
  f.comm = timed.seconds();
  f.comm.reduce_scatter /= kTimedSteps;
  f.comm.all_gather /= kTimedSteps;
  f.comm.all_reduce /= kTimedSteps;
  f.comm.other /= kTimedSteps;
  f.state_bytes = opt.Memory().total_bytes;
  return f;
}

void DistStep(benchmark::State& state, std::string setup_name, int dp) {
  const int64_t n = state.range(0);
  const ModelInputs& in =
      Reused<ModelInputs>("scaling/" + std::to_string(n), [&] { return ModelInputs(n); });
  const OptimizerSetup setup = OptimizerSetup::Defaults(setup_name);
  std::vector<RankFigures> ranks(static_cast<size_t>(dp));
  for (auto _ : state) {
    OnRanks(dp, /*gloo=*/true, [&](Communicator& comm) {
      ranks[static_cast<size_t>(comm.rank())] = TimeSteps(setup, in, comm);
    });
    state.SetIterationTime(ranks[0].step_s);
  }
  const RankFigures& r0 = ranks[0];
  double slowest = 0;
  int64_t bytes = 0;
  for (const RankFigures& r : ranks) {
    slowest = std::max(slowest, r.step_s);
    bytes = std::max(bytes, r.state_bytes);
  }
  state.counters["rs_ms"] = r0.comm.reduce_scatter * 1e3;
  state.counters["ag_ms"] = r0.comm.all_gather * 1e3;
  state.counters["allreduce_ms"] = (r0.comm.all_reduce + r0.comm.other) * 1e3;
  state.counters["update_ms"] = (r0.step_s - r0.comm.Total()) * 1e3;
  state.counters["slowest_rank_ms"] = slowest * 1e3;
  state.counters["state_bytes"] = static_cast<double>(bytes);
  state.counters["dp"] = dp;
  state.counters["elements"] = static_cast<double>(n);
}

// Per-rank bytes of main params and state after construction.
std::vector<int64_t> StateBytesPerRank(const OptimizerSetup& setup, const ModelSpec& model,
                                       int dp) {
  std::vector<int64_t> bytes(static_cast<size_t>(dp));
  OnRanks(dp, /*gloo=*/false, [&](Communicator& comm) {
    DistributedOptimizer opt(setup, model.params, at::kFloat, comm,
                             DistOptions{MegatronBucketSize(dp), at::kCPU, 1});
    bytes[static_cast<size_t>(comm.rank())] = opt.Memory().total_bytes;
  });
  return bytes;
}

void DistState(benchmark::State& state, std::string setup_name, int dp) {
  const int64_t n = state.range(0);
  const ModelSpec model = ScalingModel(n);
  const OptimizerSetup setup = OptimizerSetup::Defaults(setup_name);
  std::vector<int64_t> bytes;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    bytes = StateBytesPerRank(setup, model, dp);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const std::vector<int64_t> whole = dp == 1 ? bytes : StateBytesPerRank(setup, model, 1);
  const auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
  double sum = 0;
  for (int64_t b : bytes) sum += static_cast<double>(b);
  state.counters["state_bytes_max"] = static_cast<double>(*hi);
  state.counters["state_bytes_min"] = static_cast<double>(*lo);
  state.counters["state_bytes_mean"] = sum / dp;
  state.counters["dp1_share"] = static_cast<double>(*hi) / (static_cast<double>(whole[0]) / dp);
  state.counters["dp"] = dp;
  state.counters["elements"] = static_cast<double>(n);
}

const std::vector<int64_t>& DistSizes() {
  static const std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{16} << 20,
                                             int64_t{48} << 20};
  return sizes;
}

}  // namespace

void RegisterDistributedBenchmarks() {
  for (int dp : {1, 2, 4})
    for (int64_t n : DistSizes())
      benchmark::RegisterBenchmark(("dist_step/adamw/dp" + std::to_string(dp)).c_str(), DistStep,
                                   std::string("adamw"), dp)
          ->Arg(n)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
  for (const std::string& setup : OptimizerSetup::Names())
    for (int dp : {1, 2, 4})
      benchmark::RegisterBenchmark(("dist_state/" + setup + "/dp" + std::to_string(dp)).c_str(),
                                   DistState, setup, dp)
          ->ArgsProduct({DistSizes()})
          ->Iterations(1)
          ->Repetitions(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
}

}  // namespace shardcheck::bench
